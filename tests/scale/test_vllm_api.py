"""Every vLLM name the project uses exists, with the fields and parameters we pass, in the real vLLM release the
``gpu`` extra pins: read from that release's source (the installed package, else its wheel; see vllm_api.py),
never from the stand-in under tests/scale/fake_vllm. A vLLM upgrade that renames something fails here with
the name. Slow: the first run downloads the wheel (~350 MB, cached)."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest

from core.interfaces import GenerationRequest
from plugins.rollout.vllm_engine import sampling_kwargs
from tests.scale.vllm_api import (
    REPO,
    Member,
    VLLMSource,
    attribute_calls,
    attribute_reads,
    keyword_calls,
    pinned_version,
    project_imports,
    route_literals,
)

pytestmark = pytest.mark.slow

ENGINE = REPO / "plugins/rollout/vllm_engine.py"
REMOTE = REPO / "plugins/rollout/remote_weights.py"
HTTP_CLIENTS = [REPO / "plugins/rollout/openai_compatible.py", REMOTE]
#: output objects the engine reads (to_generation): class -> attributes
OUTPUTS = {("vllm.outputs", "RequestOutput"): ["outputs"],
           ("vllm.outputs", "CompletionOutput"): ["token_ids", "logprobs", "finish_reason"],
           ("vllm.logprobs", "Logprob"): ["logprob"]}


@pytest.fixture(scope="module")
def vllm() -> VLLMSource:
    return VLLMSource.locate()


def project_files() -> list[Path]:
    return [p for top in ("core", "plugins", "trainers", "environments") for p in sorted((REPO / top).rglob("*.py"))]


def missing_call_parameters(source: VLLMSource, module: str, cls: str, method: str, keywords: list[str],
                            positional: int) -> list[str]:
    members = source.members(module, cls)
    if method not in members or members[method].kind != "method":
        return [f"{cls}.{method}"]
    found = members[method]
    problems = [f"{cls}.{method}({k}=)" for k in keywords if k not in found.params and not found.varkw]
    if positional > len(found.params):
        problems.append(f"{cls}.{method}: {positional} positional arguments, it takes {len(found.params)}")
    return problems


def test_the_pinned_release_is_what_we_read(vllm: VLLMSource) -> None:
    version = pinned_version()
    assert version in vllm.origin or "site-packages" in vllm.origin, vllm.origin
    assert vllm.path_of("vllm.v1.engine.async_llm"), "not a vLLM source tree"


def test_every_import_of_vllm_resolves(vllm: VLLMSource) -> None:
    uses = list(project_imports(project_files()))
    assert len(uses) >= 5, uses  # AsyncEngineArgs, AsyncLLM, the weight-transfer requests, NCCL engine, vllm
    problems = []
    for path, module, name in uses:
        try:
            vllm.tree(module) if name is None else vllm.resolve(module, name)
        except LookupError as exc:
            problems.append(f"{path.relative_to(REPO)}: {exc}")
    assert not problems, problems


def test_engine_args_take_every_field_we_set(vllm: VLLMSource) -> None:
    fields = vllm.members("vllm.engine.arg_utils", "AsyncEngineArgs")
    calls = keyword_calls(ENGINE, "AsyncEngineArgs")
    assert calls, "the engine builds no AsyncEngineArgs"
    missing = [f"AsyncEngineArgs.{k} (line {line})" for line, keys in calls for k in keys if k not in fields]
    assert not missing, missing


def test_sampling_params_and_prompt_take_what_we_send(vllm: VLLMSource) -> None:
    request = GenerationRequest(prompt_ids=[1, 2, 3], images=[], max_new_tokens=4, stop_ids=[7], temperature=0.8)
    sent = sampling_kwargs(request, {5: -100.0}, seed=3)
    fields = vllm.members("vllm", "SamplingParams")
    assert not [k for k in sent if k not in fields], sorted(k for k in sent if k not in fields)
    prompt_fields = vllm.members("vllm", "TokensPrompt")
    assert {"prompt_token_ids", "multi_modal_data"} <= set(prompt_fields), sorted(prompt_fields)


def test_async_llm_has_every_method_we_call_with_those_arguments(vllm: VLLMSource) -> None:
    calls = attribute_calls(ENGINE, "engine")
    assert {"generate", "update_weights", "start_weight_update", "finish_weight_update"} <= set(calls), calls
    problems = [p for method, (line, keywords, positional) in calls.items()
                for p in missing_call_parameters(vllm, "vllm.v1.engine.async_llm", "AsyncLLM", method, keywords,
                                                 positional)]
    assert not problems, problems
    members = vllm.members("vllm.v1.engine.async_llm", "AsyncLLM")
    reads = attribute_reads(ENGINE, "engine")
    assert not [name for name in reads if name not in members], reads
    assert not [name for name in attribute_calls(ENGINE, "vllm") if name not in ("SamplingParams", "TokensPrompt")]


def test_weight_transfer_requests_and_the_nccl_trainer_side(vllm: VLLMSource) -> None:
    base = "vllm.distributed.weight_transfer.base"
    for cls in ("WeightTransferInitRequest", "WeightTransferUpdateRequest"):
        fields = vllm.members(base, cls)
        used = [k for _, keys in keyword_calls(ENGINE, cls) for k in keys]
        assert used and all(k in fields for k in used), (cls, used, sorted(fields))
    ipc = vllm.members("vllm.distributed.weight_transfer.ipc_engine", "IPCWeightTransferUpdateInfo")
    sent = ipc_update_keys()
    assert sent and all(k in ipc for k in sent), (sent, sorted(ipc))


def ipc_update_keys() -> list[str]:
    """The keys of the update_info dict our IPC transport builds (plugins/rollout/vllm_weights.py)."""
    import ast

    tree = ast.parse((REPO / "plugins/rollout/vllm_weights.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "info" for t in node.targets) \
                and isinstance(node.value, ast.Dict):
            return [k.value for k in node.value.keys if isinstance(k, ast.Constant)]
    return []


def test_the_nccl_trainer_engine_we_drive(vllm: VLLMSource) -> None:
    """plugins/rollout/remote_weights.py's _NcclTransport against vLLM's trainer-side NCCL engine: the class
    methods it calls, the init-info fields it passes, the WeightSource it implements and the client protocol
    the engine calls back (every method with its parameters)."""
    from plugins.rollout.remote_weights import ServerClient

    module = "vllm.distributed.weight_transfer.nccl_engine"
    engine = vllm.members(module, "NCCLTrainerWeightTransferEngine")
    assert {"trainer_init", "send_weights"} <= set(engine), sorted(engine)
    init_fields = set(vllm.members(module, "NCCLTrainerInitInfo"))
    passed = {k for _, keys in keyword_calls(REMOTE, "NCCLTrainerInitInfo") for k in keys}
    assert passed and passed <= init_fields, (sorted(passed), sorted(init_fields))
    assert {k for _, keys in keyword_calls(REMOTE, "trainer_init") for k in keys} <= set(engine["trainer_init"].params)
    base = "vllm.distributed.weight_transfer.base"
    assert {"name", "dtype", "shape"} <= set(vllm.members(base, "ParamMeta"))
    assert {"metadata", "iter_full"} <= set(vllm.members(base, "WeightSource"))
    protocol = {n: m for n, m in vllm.members(base, "VLLMWeightSyncClient").items() if m.kind == "method"}
    ours = {n: tuple(inspect.signature(getattr(ServerClient, n)).parameters)[1:] for n in protocol
            if hasattr(ServerClient, n)}
    assert set(ours) == set(protocol), (sorted(ours), sorted(protocol))
    assert all(ours[n] == protocol[n].params for n in protocol), (ours, {n: m.params for n, m in protocol.items()})


def test_the_outputs_we_read(vllm: VLLMSource) -> None:
    missing = [f"{cls}.{attr}" for (module, cls), attrs in OUTPUTS.items()
               for attr in attrs if attr not in vllm.members(module, cls)]
    assert not missing, missing


def test_every_http_route_we_call_is_served_by_vllm_serve(vllm: VLLMSource) -> None:
    routes = vllm.routes()
    used = {route: (path.name, line) for path in HTTP_CLIENTS for route, line in route_literals(path).items()}
    assert {"/v1/completions", "/update_weights", "/init_weight_transfer_engine"} <= set(used), used
    missing = {route: where for route, where in used.items() if route not in routes}
    assert not missing, missing
    print(json.dumps({"vllm": vllm.origin, "routes": sorted(used)}))


def test_the_checker_names_what_a_renamed_release_lacks(vllm: VLLMSource) -> None:
    """The checks can fail: in a copy of the release with a field and a method renamed, they say which."""
    files = dict(vllm.files)
    for name, text in files.items():  # AsyncLLM and the EngineClient protocol it implements
        files[name] = text.replace("def update_weights(", "def update_weights_v2(")
    sampling = vllm.path_of("vllm.sampling_params")
    assert sampling is not None and "logit_bias:" in files[sampling]
    files[sampling] = files[sampling].replace("logit_bias:", "token_bias:")
    renamed = VLLMSource(files, "mutated")
    assert missing_call_parameters(renamed, "vllm.v1.engine.async_llm", "AsyncLLM", "update_weights", [], 1) == [
        "AsyncLLM.update_weights"]
    assert "logit_bias" not in renamed.members("vllm", "SamplingParams")
    assert missing_call_parameters(vllm, "vllm.v1.engine.async_llm", "AsyncLLM", "start_weight_update",
                                   ["is_checkpoint_format"], 0) == ["AsyncLLM.start_weight_update(is_checkpoint_format=)"]
    assert isinstance(vllm.members("vllm.v1.engine.async_llm", "AsyncLLM")["generate"], Member)
