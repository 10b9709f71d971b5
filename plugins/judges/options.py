"""Options of the judge executors (the ``judge.options`` block of the config)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from plugins.judges.validator import DEFAULT_ALLOWED_IMPORTS


class SandboxLimits(BaseModel):
    """Per-call limits. The defaults suit judges: a metric or getter does a few file reads and comparisons."""

    model_config = ConfigDict(extra="forbid")

    wall_timeout_s: float = Field(10.0, gt=0, le=600, description="wall-clock limit per call (status timeout)")
    cpu_time_s: int = Field(10, ge=1, le=600, description="CPU-time limit per call (RLIMIT_CPU; status resource_limit)")
    memory_bytes: int = Field(512 << 20, ge=64 << 20, description="address-space limit (RLIMIT_AS)")
    file_size_bytes: int = Field(16 << 20, ge=0, description="largest file the judge may write (RLIMIT_FSIZE)")
    scratch_bytes: int = Field(64 << 20, ge=1 << 20, description="size of the private scratch tmpfs")
    max_processes: int = Field(8, ge=1, le=256, description="processes and threads the judge may run (RLIMIT_NPROC)")
    max_open_files: int = Field(64, ge=16, le=4096, description="open file descriptors (RLIMIT_NOFILE)")
    max_output_bytes: int = Field(1 << 20, ge=0, description="stdout+stderr the judge may print before it is killed")
    max_result_bytes: int = Field(8 << 20, ge=1024, description="largest JSON result (a getter's artifact)")

    def limits_for_runner(self) -> dict[str, float | int]:
        """Just the limits (subclasses add executor options the runner does not take)."""
        return {name: getattr(self, name) for name in SandboxLimits.model_fields}


class SandboxOptions(SandboxLimits):
    """Options of the ``sandbox`` executor: generated code runs in a confined process on this host."""

    validate_code: bool = Field(
        True,
        description="run the rule validator before executing (false only to test the sandbox itself)",
    )
    allowed_imports: list[str] = Field(
        default_factory=lambda: list(DEFAULT_ALLOWED_IMPORTS),
        description="modules generated judges may import (a listed package allows its submodules)",
    )
    allow_unisolated: bool = Field(
        False,
        description="run untrusted judges without namespaces (no network or filesystem isolation) where the "
        "kernel refuses them; unsafe, for development machines only",
    )
    max_concurrency: int = Field(8, ge=1, le=256, description="sandboxed calls running at once per executor")
    artifact_roots: list[str] | None = Field(
        None,
        description="host directories (glob patterns allowed) whose files a metric may receive as artifacts, "
        "bound read-only; default: the evaluations' cache directories, <tmp>/scalecua-judge-*",
    )
    work_dir: str | None = Field(None, description="where per-call mount points live (default: system temp dir)")
    python: str | None = Field(None, description="interpreter for the sandbox (default: the running one)")


class InEnvironmentOptions(SandboxOptions):
    """Options of the ``in-environment`` executor: getters run inside isolated environments via the probe."""

    probe_grace_s: float = Field(
        15.0, ge=0, description="extra seconds allowed for the probe round trip on top of wall_timeout_s"
    )
