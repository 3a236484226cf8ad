"""tools/bench/reading_probe.py: its vocabulary, its pages, and a few steps end to end."""

from __future__ import annotations

import json

import numpy as np
import pytest

from chartjax.tools.bench import reading_probe


def _args(*extra):
    a = reading_probe.parse_args(["--size", "60x30", "--patches", "16", *extra])
    a.page = (60, 30)
    return a


def test_targets_round_trip_through_the_character_vocabulary():
    ids = reading_probe.encode("-1,234.5%", 12)
    assert len(ids) == 12 and ids[9] == 1 and ids[10:] == [0, 0]
    assert reading_probe.decode(ids) == "-1,234.5%"
    assert reading_probe.decode([5, 1, 6]) == "3"  # nothing after the end
    # An untrained model may write ids past the characters (its vocabulary has 32): never a match.
    assert reading_probe.decode([3, 31, 4, 1]) == "1?2"
    with pytest.raises(ValueError, match="longer than"):
        reading_probe.encode("123456789012", 12)


def test_centred_numbers_sit_at_one_place_and_placed_ones_move():
    def ink_centres(placement, n=12):
        rng = np.random.default_rng(0)
        a = _args("--font_sizes", "12,12", "--fonts", "sans")
        out = []
        for _ in range(n):
            page, text = reading_probe.draw(rng, a, placement)
            assert page.shape == (30, 60, 4) and text
            ink = np.argwhere(page[..., 0] < 128)
            out.append(ink.mean(axis=0))
        return np.array(out)

    # Centred: the ink's centre moves only by the numbers' own shapes; anywhere: by far more.
    assert np.ptp(ink_centres("centre")[:, 0]) < 3
    assert np.ptp(ink_centres("anywhere")[:, 0]) > 6


def test_grid_places_sit_on_the_patch_grid_plus_the_curriculum_offset():
    rng = np.random.default_rng(0)
    room = (100, 40)  # pixels to spare: x in 0..100, y in 0..40
    on_grid = np.array([reading_probe.place(rng, room, "grid") for _ in range(300)])
    assert set(np.unique(on_grid[:, 0])) == {0, 16, 32, 48, 64, 80, 96}
    assert set(np.unique(on_grid[:, 1])) == {0, 16, 32}
    jittered = np.array([reading_probe.place(rng, room, "grid", 4) for _ in range(300)])
    assert set(np.unique(jittered[:, 0] % 16)) == {0, 1, 2, 3}  # 96 + 3 = 99 fits the room
    assert jittered[:, 1].max() == 35
    full = np.array([reading_probe.place(rng, room, "grid", 16) for _ in range(300)])
    assert tuple(full.max(axis=0)) == room  # 96 + 15 and 32 + 15 would not fit: kept on the page
    assert reading_probe.place(rng, (-5, 7), "centre") == (0, 3)  # a block wider than the page
    assert reading_probe.parse_phases("1000:4,0:1") == [(0, 1), (1000, 4)]
    with pytest.raises(ValueError, match="1..16"):
        reading_probe.parse_phases("0:17")
    with pytest.raises(ValueError, match="1..8"):  # an 8-px patch has 8 offsets a side
        reading_probe.parse_phases("0:9", patch=8)
    with pytest.raises(ValueError, match="--placement grid"):
        reading_probe.main(["--phases", "0:1", "--steps", "1"])


@pytest.mark.parametrize("patch", ["16", "8"])
def test_a_few_steps_report_a_curve(tmp_path, capsys, patch):
    out = tmp_path / "probe.json"
    report = reading_probe.main(
        [
            "--patch",
            patch,
            "--size",
            "60x30",
            "--patches",
            "16",
            "--steps",
            "3",
            "--eval_every",
            "2",
            "--batch",
            "2",
            "--heldout",
            "3",
            "--emb",
            "32",
            "--layers",
            "1",
            "--out",
            str(out),
        ]
    )
    curve = report["results"]["curve"]
    assert [r["step"] for r in curve] == [2, 3]
    for r in curve:
        assert np.isfinite(r["train_loss"])
        assert 0 <= r["heldout_exact_anywhere"] <= 1 and 0 <= r["heldout_exact_centre"] <= 1
    assert json.loads(out.read_text())["results"]["curve"] == json.loads(json.dumps(curve))
    assert len(capsys.readouterr().err.strip().splitlines()) == 2  # one progress line each
