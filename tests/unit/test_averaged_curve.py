"""bench.averaged_curve: the averages taken while a run trains, and their BLEU against the
run's training minutes, on the hostile-inputs fixture's 4-step run (checkpoints at 2 and 4)."""

import json

import pytest
import test_hostile_inputs

from bench import averaged_curve
from transformer_core.model.checkpoint import load_checkpoint

world = test_hostile_inputs.world  # two tiny pairs, their data and 4-step runs


def test_minutes_at_takes_the_last_record_at_or_before_the_step(tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    records = [{"event": "train", "step": 2, "elapsed_s": 60.0}, {"event": "dev", "step": 4},
               {"event": "train", "step": 4, "elapsed_s": 150.0}]  # fmt: skip
    metrics.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert averaged_curve.minutes_at(metrics, 1) is None
    assert averaged_curve.minutes_at(metrics, 3) == 1.0
    assert averaged_curve.minutes_at(metrics, 4) == 2.5


def test_watch_then_score_gives_a_point_per_average(world, tmp_path, capsys):
    run, snaps = world["run_a"], tmp_path / "snaps"
    averaged_curve.main(["watch", str(run), "--every", "2", "--last", "2", "--until", "5",
                         "--out", str(snaps), "--poll", "0"])  # fmt: skip
    assert sorted(p.name for p in snaps.glob("*.pt")) == ["avg_step2.pt", "avg_step4.pt"]
    assert load_checkpoint(snaps / "avg_step4.pt")["steps"] == [2, 4]
    source, out = world["root"] / "a.src", tmp_path / "curve.json"
    averaged_curve.main(["score", str(snaps), "--run-dir", str(run), "--spm", str(world["spm_a"]),
                         "--split", "dev", str(source), str(world["root"] / "a.tgt"),
                         "--out", str(out), "--beam", "2", "--max-len-b", "5"])  # fmt: skip
    result = json.loads(out.read_text())
    assert result["translate"] == ["--beam", "2", "--max-len-b", "5"] and result["cpu"]
    assert [p["step"] for p in result["points"]] == [2, 4]
    for point in result["points"]:
        assert point["minutes"] is not None
        assert set(point["dev"]) == set(averaged_curve.SCORES)
        assert all(0 <= value <= 100 for value in point["dev"].values())


def test_a_missing_run_folder_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        averaged_curve.main(["watch", str(tmp_path / "nowhere"), "--every", "2", "--last", "2",
                             "--until", "5", "--out", str(tmp_path / "snaps")])  # fmt: skip
    assert stop.value.code == 2 and "nowhere: no such run folder" in capsys.readouterr().err
