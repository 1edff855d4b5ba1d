"""`nmtrepro status` on a run's files: a Snakemake log as Snakemake 9 writes it, training logs, a claims page."""
from nmtrepro import cli

SNAKEMAKE_LOG = """Job stats:
job                 count
----------------  -------
train                   4
total                  12

[Wed Dec  2 07:34:41 2026]
Job 4: Training base (0 GPUs, 4000 MB, 60 min; checkpoints in results/ci/checkpoints/base)
Reason: Missing output files: results/ci/train/base/final.pt
Shell command: exec nmtrepro train --prepared results/ci/prepare/x --out results/ci/train/base/final.pt
[Wed Dec  2 07:34:42 2026]
Job 5: Training pr (0 GPUs, 4000 MB, 60 min; checkpoints in results/ci/checkpoints/pr)
Reason: Missing output files: results/ci/train/pr/final.pt
[Wed Dec  2 07:34:42 2026]
Finished jobid: 4 (Rule: train)
2 of 12 steps (17%) done
Job 7: Averaging the last 3 checkpoints of base
Job 8: Training big (0 GPUs, 4000 MB, 60 min; checkpoints in results/ci/checkpoints/big)
Reason: Missing output files: results/ci/train/big/final.pt
[Wed Dec  2 07:34:50 2026]
Error in rule train:
    message: None
    jobid: 8
    output: results/ci/train/big/final.pt
"""
TRAIN_LOG = """07:35:12 nmtrepro.training.train | starting from scratch in results/ci/checkpoints/pr
07:36:45 nmtrepro.training.train | step 150/1000 | epoch 2 | loss 8.381 | nll 7.727 | ppl 211.84 | lr 1.13e-03 | 6978 tgt tok/s | 91 s trained, ~518 s left
07:36:46 nmtrepro.training.train | step 100 | valid loss 8.100 | valid nll 7.654 | ppl 201.4
"""
CLAIMS = """# Paper A: claims

| claim | metric | verdict |
| --- | --- | --- |
| +PR beats Base | tokenized BLEU | inconclusive: the seed pairs split |
"""


def test_status_reads_the_snakemake_log_the_training_logs_and_the_claims_pages(tmp_path, capsys):
    (tmp_path / ".snakemake" / "log").mkdir(parents=True)
    (tmp_path / ".snakemake" / "log" / "2026-12-02T073435.snakemake.log").write_text(SNAKEMAKE_LOG)
    results = tmp_path / "results" / "ci"
    (results / "logs" / "train").mkdir(parents=True)
    (results / "logs" / "train" / "pr.log").write_text(TRAIN_LOG)
    (results / "report").mkdir()
    (results / "report" / "paper_A_claims.md").write_text(CLAIMS)
    assert cli.main(["status", "--config", "scale=ci", "--directory", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "trainings 1 done, 1 running, 1 failed, 1 waiting of 4" in out
    assert "running  pr: step 150/1000, 6978 tgt tok/s, valid NLL 7.654 at step 100, ~8 min 38 s left" in out
    assert "claims judged: 1, shown unjudged: 0" in out
    assert "paper_A_claims: +PR beats Base: inconclusive: the seed pairs split" in out


def test_status_names_a_scale_without_results(tmp_path, capsys):
    assert cli.main(["status", "--config", "scale=gpu", "--directory", str(tmp_path)]) == 2
    assert "results/gpu: no results folder" in capsys.readouterr().err
