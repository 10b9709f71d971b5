"""A miniature training run for the resume test (run as a script in its own process).

Each iteration: the registered ``frontier`` sampler selects tasks; every task gets
n rollouts whose response ids and success are drawn from the *global* python and
torch RNGs (so their restoration is exercised); segments are built directly from
token ids with on-policy rollout logprobs; rewards and GRPO advantages come from
the objective; the ``torch`` trainer steps; a checkpoint is written. One JSON
line per iteration records the batch, a digest of the sampler state and of the
weights.

    python resume_driver.py RUN_DIR RECORD --iterations N [--resume] [--pause-after K | --pause-before-save K]

``--pause-after K`` stops after checkpoint K is written; ``--pause-before-save K``
stops after iteration K trained but before its checkpoint: the process then waits
to be killed (the test sends SIGKILL).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from core.runtime.checkpoint import CheckpointManager  # noqa: E402
from core.config import AlgorithmSection  # noqa: E402
from core.interfaces import Message  # noqa: E402
from core.pluginmanager import load_plugins  # noqa: E402
from core.types import EpisodeStatus, Judgement, RolloutGroup, Segment, Task, Trajectory  # noqa: E402
from trainers.objective import assign_advantages  # noqa: E402

TASKS = [Task(id=f"task{i:02d}", instruction=f"Do step {i} in the spreadsheet", evaluator={"func": "exact_match"})
         for i in range(8)]
ALGORITHM = AlgorithmSection(batch_size=2, n_rollouts=3, kl_coef=1e-3)


def digest(payload: bytes) -> str:
    return hashlib.sha256(payload).hexdigest()[:16]


def weights_digest(model: torch.nn.Module) -> str:
    h = hashlib.sha256()
    for name, param in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(param.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()[:16]


def wait_to_be_killed(marker: Path) -> None:
    marker.write_text("paused")
    while True:
        time.sleep(1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("record", type=Path)
    parser.add_argument("--iterations", type=int, required=True)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--pause-after", type=int)
    parser.add_argument("--pause-before-save", type=int)
    args = parser.parse_args()
    torch.set_num_threads(1)  # bitwise-repeatable CPU kernels across processes

    plugins = load_plugins(environ={})
    model = plugins.registry("model").create("qwen-vl", {"tiny": {"family": "qwen3_vl"}, "seed": 0})
    renderer = model.renderer()
    trainer = plugins.registry("trainer").create("torch", {"device": "cpu", "lr": 1e-3}, model=model,
                                                 algorithm=ALGORITHM, seed=0)
    sampler = plugins.registry("sampler").create("frontier", {})
    sampler.setup(TASKS, seed=7)
    manager = CheckpointManager(args.run_dir, keep=2)
    completed = 0
    if args.resume:
        completed = manager.load(trainer=trainer, sampler=sampler).iteration
    else:
        random.seed(11)
        np.random.seed(12)
        torch.manual_seed(13)

    vocab = [i for i in range(len(renderer.tokenizer)) if i not in set(trainer.suppress_ids) | set(renderer.stop_ids)]
    prompts = {t.id: renderer.render([Message("system", ["You operate a desktop."]), Message("user", [t.instruction])],
                                     add_generation_prompt=True).ids for t in TASKS}
    success_rate = {t.id: (i % 4) / 3 for i, t in enumerate(TASKS)}

    while completed < args.iterations:
        iteration = completed
        batch = sampler.select(iteration, ALGORITHM.batch_size)
        groups, segments = [], []
        for task_id in batch:
            trajectories = []
            for j in range(ALGORITHM.n_rollouts):
                response = [random.choice(vocab) for _ in range(random.randint(2, 6))] + [renderer.stop_ids[0]]
                ids = prompts[task_id] + response
                seg = Segment(f"{task_id}/{iteration}/{j}", task_id, 0, ids,
                              [0] * len(prompts[task_id]) + [1] * len(response), [0.0] * len(ids))
                success = float(torch.rand(()) < success_rate[task_id])
                status = EpisodeStatus.INCOMPLETE if random.random() < 0.2 else EpisodeStatus.COMPLETED
                traj = Trajectory(seg.trajectory_id, task_id, task_id, status=status,
                                  judgement=Judgement(score=success), segments=[seg])
                trajectories.append(traj)
                segments.append(seg)
            groups.append(RolloutGroup(task_id, trajectories))
        for seg, logprobs in zip(segments, trainer.recompute_logprobs(segments)):
            seg.rollout_logprobs = logprobs  # as an on-policy rollout engine reports them
        assign_advantages(groups, ALGORITHM)
        sampler.observe(iteration, {g.task_id: [t.judgement.score for t in g.trajectories] for g in groups})
        metrics = trainer.train_step(segments)
        completed += 1
        if args.pause_before_save == completed:
            wait_to_be_killed(args.run_dir / "paused")
        record = {
            "iteration": iteration,
            "batch": batch,
            "rewards": [t.reward for g in groups for t in g.trajectories],
            "sampler": digest(json.dumps(sampler.state_dict(), sort_keys=True).encode()),
            "weights": weights_digest(trainer.model),
            "loss": metrics["loss/pg"],
        }
        with args.record.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        manager.save(completed, trainer=trainer, sampler=sampler)
        if args.pause_after == completed:
            wait_to_be_killed(args.run_dir / "paused")


if __name__ == "__main__":
    main()
