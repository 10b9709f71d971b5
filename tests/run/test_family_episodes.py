"""Long family variants on real desktops, through the episode loop and the real sliding-window segmenter: an
oracle of 13 turns holds more screenshots than K + Delta, so its episode is trained as more than one segment,
and every response token is trained exactly once."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import yaml

from core.config import load_config
from plugins.synthesis.families import CATALOG

pytestmark = pytest.mark.desktop
ROOT = Path(__file__).resolve().parents[2]


def test_a_long_family_episode_is_several_segments_and_trains_each_token_once(tmp_path: Path) -> None:
    from core.runtime.components import build_components
    from core.commands.record import record_oracles

    tasks_dir = tmp_path / "tasks"
    tasks_dir.mkdir()
    long_families = [n for n in CATALOG.names() if CATALOG.get(n).kind == "long"][:2]
    for name in long_families:
        task = CATALOG.get(name).variant("train", 0, 5).task()
        (tasks_dir / f"{task.id}.json").write_text(json.dumps(task.to_json()))
    config = yaml.safe_load((ROOT / "configs" / "quickstart.yaml").read_text())
    config["run"]["output_dir"] = str(tmp_path / "runs")
    config["tasks"] = {"paths": [str(tasks_dir)]}
    config["environment"]["options"].update(max_environments=2, settle_s=0.1, desktop_user=None)
    config["algorithm"]["max_turns"] = 20
    config["segmenter"] = {"name": "sliding-window", "options": {"keep_images": 5, "min_removal": 5}}
    config.pop("recipe", None)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    resolved, plugins = load_config(path)
    c = build_components(resolved, plugins, tmp_path / "run", train=False)

    async def record():
        try:
            return await record_oracles(list(c.tasks.values()), c.deps, concurrency=2)
        finally:
            await c.close()

    result = asyncio.run(record())
    assert not result.failed and len(result.recorded) == len(long_families)
    for traj in result.recorded:
        assert len(traj.turns) >= 13 and traj.success
        assert len(traj.segments) >= 2, f"{traj.task_id}: {len(traj.turns)} turns in one segment"
        trained = sum(sum(s.loss_mask[1:]) for s in traj.segments)
        assert trained == sum(len(t.response_ids) for t in traj.turns)
        assert all(len(s.images) <= 5 + 5 for s in traj.segments)  # never more than K + Delta screenshots
