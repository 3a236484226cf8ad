"""The package list, which pyproject.toml cannot compute (docs/design.md §2).

The repository keeps `tools/` and `gin_configs/` at its top level; the wheel installs them
inside the package as `chartjax.tools` and `chartjax.gin_configs`, so nothing generic lands at
the top of site-packages. Everything else about the distribution is in pyproject.toml.
"""

from setuptools import find_packages, setup

MAPPED = {"chartjax.tools": "tools", "chartjax.gin_configs": "gin_configs"}

packages = find_packages(include=["chartjax", "chartjax.*", "tfds_builders", "tfds_builders.*"])
for name, folder in MAPPED.items():
    packages += [name, *(f"{name}.{sub}" for sub in find_packages(folder))]

setup(packages=packages, package_dir=MAPPED)
