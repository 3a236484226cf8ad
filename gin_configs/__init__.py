"""chartjax's gin files (installed as `chartjax.gin_configs`; chartjax/config.py finds them)."""
