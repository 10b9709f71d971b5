"""The routes of ``plugins.serving``: OpenAI/vLLM generation endpoints and vLLM's weight-update protocol."""

from __future__ import annotations

import threading
import uuid
from typing import Any, Callable, Mapping, Protocol

import structlog

from core.interfaces import Generation, GenerationRequest, RolloutEngine
from plugins.serving import protocol as proto
from plugins.serving.gate import Gate
from plugins.serving.protocol import BadRequest
from plugins.serving.weight_transfer import GlooChannel, InitInfo, UpdateInfo, WeightTransferProtocolError, receive_tensors

log = structlog.get_logger(__name__)

Route = Callable[[Any, Mapping[str, str]], tuple[int, Any]]
PAUSE_MODES = ("abort", "wait", "keep")
#: the routes that change what the server serves (its weights) or stop it serving: never open beyond loopback
CONTROL_ROUTES = frozenset({"/pause", "/resume", "/init_weight_transfer_engine", "/start_weight_update",
                            "/update_weights", "/finish_weight_update"})


class Served(Protocol):
    """What the routes need of the server in front of the engine (``plugins.serving.server.EngineServer``)."""

    model_name: str
    renderer: Any
    vocab_size: int
    banned_ids: tuple[int, ...]
    gate: Gate
    weights: WeightReceiver

    def generate(self, request: GenerationRequest) -> Generation: ...


class Routes:
    def __init__(self, app: Served) -> None:
        self.app = app
        self.table: dict[tuple[str, str], Route] = {
            ("GET", "/health"): lambda body, q: (200, None),
            ("GET", "/v1/models"): self.models,
            ("POST", "/v1/completions"): self.completions,
            ("POST", "/v1/chat/completions"): self.chat,
            ("POST", "/v1/chat/completions/render"): self.render,
            ("POST", "/inference/v1/generate"): self.generate,
            ("POST", "/pause"): self.pause,
            ("POST", "/resume"): self.resume,
            ("GET", "/is_paused"): lambda body, q: (200, {"is_paused": self.app.gate.paused}),
            ("GET", "/get_world_size"): lambda body, q: (200, {"world_size": 1}),
            ("POST", "/init_weight_transfer_engine"): self.init_weight_transfer,
            ("POST", "/start_weight_update"): lambda body, q: self.app.weights.start(),
            ("POST", "/update_weights"): self.update_weights,
            ("POST", "/finish_weight_update"): lambda body, q: self.app.weights.finish(),
        }

    def find(self, method: str, path: str) -> Route:
        route = self.table.get((method, path))
        if route is not None:
            return route
        if any(p == path for _, p in self.table):
            raise BadRequest(f"{method} is not allowed on {path}", status=405)
        known = ", ".join(sorted({p for _, p in self.table}))
        raise BadRequest(f"no route {path}; this server offers {known}", status=404)

    # -- generation -------------------------------------------------------------------

    def models(self, body: Any, query: Mapping[str, str]) -> tuple[int, Any]:
        entry = {"id": self.app.model_name, "object": "model", "owned_by": "scalecua", "root": self.app.model_name}
        return 200, {"object": "list", "data": [entry]}

    def completions(self, body: Any, query: Mapping[str, str]) -> tuple[int, Any]:
        body = self._object(body)
        app = self.app
        if isinstance(body.get("prompt"), str):
            prompt = app.renderer.encode_text(body["prompt"])
        else:
            prompt = proto.token_prompt(body.get("prompt"), app.vocab_size, "prompt")
        proto.check_placeholders(prompt, [], app.renderer, "prompt")  # completions carry no images
        want = proto.check_logprobs_count(body.get("logprobs"), "logprobs")
        request = proto.sampling_request(body, prompt, [], renderer=app.renderer, banned_ids=app.banned_ids)
        gen = app.generate(request)
        return 200, proto.completion_body(app.model_name, body, prompt, gen, app.renderer, want)

    def chat(self, body: Any, query: Mapping[str, str]) -> tuple[int, Any]:
        body = self._object(body)
        app = self.app
        prompt, images = self._render_messages(body)
        want = proto.check_logprobs_count(body.get("logprobs"), "logprobs")
        if want:
            proto.check_logprobs_count(body.get("top_logprobs") or 0, "top_logprobs")
        request = proto.sampling_request(body, prompt, images, renderer=app.renderer, banned_ids=app.banned_ids,
                                         max_tokens_key="max_completion_tokens")
        gen = app.generate(request)
        return 200, proto.chat_body(app.model_name, body, prompt, gen, app.renderer, want)

    def render(self, body: Any, query: Mapping[str, str]) -> tuple[int, Any]:
        body = self._object(body)
        ids, images = self._render_messages(body)
        runs = proto.check_placeholders(ids, images, self.app.renderer, "messages")
        return 200, proto.render_body(self.app.model_name, body, ids, images, runs)

    def generate(self, body: Any, query: Mapping[str, str]) -> tuple[int, Any]:
        body = self._object(body)
        app = self.app
        prompt = proto.token_prompt(body.get("token_ids"), app.vocab_size, "token_ids")
        images = self._feature_images(body.get("features"), prompt)
        sampling = body.get("sampling_params")
        if not isinstance(sampling, Mapping):
            raise BadRequest("sampling_params must be an object (vLLM's SamplingParams)", param="sampling_params")
        want = proto.check_logprobs_count(sampling.get("logprobs"), "sampling_params.logprobs")
        request = proto.sampling_request(sampling, prompt, images, renderer=app.renderer, banned_ids=app.banned_ids,
                                         where="sampling_params.")
        gen = app.generate(request)
        request_id = str(body.get("request_id") or uuid.uuid4().hex)
        return 200, proto.generate_body(request_id, app.model_name, prompt, gen, app.renderer, want)

    def _render_messages(self, body: Mapping[str, Any]) -> tuple[list[int], list[Any]]:
        app = self.app
        messages = proto.parse_messages(body.get("messages"))
        add_generation_prompt = body.get("add_generation_prompt", True)
        template = body.get("chat_template")
        if template is None:
            rendered = app.renderer.render(messages, add_generation_prompt=bool(add_generation_prompt))
            return list(rendered.ids), list(rendered.images)
        if not app.trust_request_chat_template:
            raise BadRequest("chat_template in the request is refused: start plugins.serving with "
                             "--trust-request-chat-template to allow it", param="chat_template")
        tokenizer = getattr(app.renderer, "tokenizer", None)
        if not isinstance(template, str) or not hasattr(tokenizer, "apply_chat_template"):
            raise BadRequest("chat_template must be a Jinja string, and this model's renderer must have a Hugging "
                             "Face tokenizer to apply it", param="chat_template")
        conversation = [{"role": m.role, "content": [{"type": "text", "text": p} if isinstance(p, str)
                                                     else {"type": "image"} for p in m.content]} for m in messages]
        try:
            text = tokenizer.apply_chat_template(conversation, chat_template=template, tokenize=False,
                                                 add_generation_prompt=bool(add_generation_prompt))
        except Exception as exc:  # a template error is the client's
            raise BadRequest(f"chat_template failed to render: {exc}", param="chat_template") from None
        images = [p for m in messages for p in m.content if not isinstance(p, str)]
        collapsed = app.renderer.encode_text(text)
        pads = collapsed.count(app.renderer.image_pad_id)
        if pads != len(images):
            raise BadRequest(f"chat_template rendered {pads} image placeholders for {len(images)} images",
                             param="chat_template")
        ids: list[int] = []
        queue = iter(images)
        for token in collapsed:
            ids.extend([token] * app.renderer.image_tokens(next(queue)) if token == app.renderer.image_pad_id
                       else [token])
        return ids, images

    def _feature_images(self, features: Any, prompt: list[int]) -> list[Any]:
        renderer = self.app.renderer
        runs = proto.pad_runs(prompt, renderer.image_pad_id)
        if features is None:
            if runs:
                raise BadRequest(f"token_ids hold {len(runs)} image placeholder runs but no features were sent",
                                 param="features")
            return []
        if not isinstance(features, Mapping):
            raise BadRequest("features must be an object", param="features")
        places = (features.get("mm_placeholders") or {})
        data = features.get("kwargs_data")
        other = sorted(set(places) - {"image"})
        if other:
            raise BadRequest(f"features: modalities {other} are not supported (images only)", param="features")
        places = places.get("image") or []
        if data is None or not isinstance(data, Mapping) or not isinstance(data.get("image"), list):
            raise BadRequest("features.kwargs_data.image is required: plugins.serving keeps no multimodal cache",
                             param="features.kwargs_data")
        items = data["image"]
        if len(items) != len(places) or len(places) != len(runs):
            raise BadRequest(f"features: {len(places)} placeholders and {len(items)} data items for "
                             f"{len(runs)} image placeholder runs in token_ids", param="features")
        images = []
        for index, (place, item, run) in enumerate(zip(places, items, runs)):
            where = f"features.mm_placeholders.image[{index}]"
            if not isinstance(place, Mapping) or (place.get("offset"), place.get("length")) != run:
                raise BadRequest(f"{where} = {place!r} does not cover the image placeholder run "
                                 f"(offset {run[0]}, length {run[1]}) of token_ids", param=where)
            if item is None:
                raise BadRequest(f"features.kwargs_data.image[{index}] is null: plugins.serving keeps no multimodal "
                                 "cache; send the data", param="features.kwargs_data")
            images.append(proto.decode_image(item, f"features.kwargs_data.image[{index}]"))
        proto.check_placeholders(prompt, images, renderer, "token_ids")
        return images

    # -- pause / weights --------------------------------------------------------------

    def pause(self, body: Any, query: Mapping[str, str]) -> tuple[int, Any]:
        mode = query.get("mode", "abort")
        if mode not in PAUSE_MODES:
            raise BadRequest(f"pause mode {mode!r} is not one of {', '.join(PAUSE_MODES)}", param="mode")
        self.app.gate.pause()  # in-flight generations finish in every mode (they cannot be aborted here)
        return 200, {"status": "paused"}

    def resume(self, body: Any, query: Mapping[str, str]) -> tuple[int, Any]:
        self.app.gate.resume()
        return 200, {"status": "resumed"}

    def init_weight_transfer(self, body: Any, query: Mapping[str, str]) -> tuple[int, Any]:
        raw = self._object(body).get("init_info")
        if raw is None:
            raise BadRequest("Missing 'init_info' in request body", param="init_info")
        return self.app.weights.init(_protocol(InitInfo.parse, raw))

    def update_weights(self, body: Any, query: Mapping[str, str]) -> tuple[int, Any]:
        raw = self._object(body).get("update_info")
        if raw is None:
            raise BadRequest("Missing 'update_info' in request body", param="update_info")
        return self.app.weights.update(_protocol(UpdateInfo.parse, raw))

    def _object(self, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise BadRequest("the request body must be a JSON object")
        model = body.get("model")
        if model is not None and model != self.app.model_name:
            raise BadRequest(f"The model `{model}` does not exist; this server serves `{self.app.model_name}`",
                             status=404, param="model")
        return body


class WeightReceiver:
    """Server side of vLLM's weight-update protocol over the Gloo data plane (one worker: rank ``rank_offset``)."""

    def __init__(self, engine: RolloutEngine, gate: Gate, *, timeout_s: float) -> None:
        self.engine = engine
        self.gate = gate
        self.timeout_s = timeout_s
        self._lock = threading.Lock()  # one control call at a time
        self.channel: GlooChannel | None = None
        self.session = False
        self.updates = 0

    def init(self, info: InitInfo) -> tuple[int, Any]:
        if info.world_size != info.rank_offset + 1:
            raise BadRequest(f"init_info.world_size={info.world_size} but this server has 1 worker: use "
                             f"rank_offset + 1 = {info.rank_offset + 1}", param="init_info.world_size")
        with self._lock:
            if self.session:  # a new rendezvous replaces the old group and ends its unfinished update
                self.engine.abort_weight_update()
            self.channel, self.session = None, False
            try:
                channel = GlooChannel(info, info.rank_offset, timeout_s=self.timeout_s)
                channel.join()
            except Exception as exc:  # a rendezvous that never completes is the trainer's to fix
                raise BadRequest(f"weight transfer rendezvous with {info.master_address}:{info.master_port} "
                                 f"failed: {exc}", status=500) from None
            self.channel = channel
        log.info("weight transfer group joined", master=f"{info.master_address}:{info.master_port}",
                 rank=info.rank_offset, world_size=info.world_size)
        return 200, {"message": "Weight transfer initialized"}

    def start(self) -> tuple[int, Any]:
        with self._lock:
            if self.channel is None:
                raise BadRequest("no weight transfer group: call /init_weight_transfer_engine first", status=409)
            if self.session:
                raise BadRequest("a weight update is already active: call /finish_weight_update first", status=409)
            # the engine's weight-sync session: generation waits until /finish_weight_update commits it
            self.engine.begin_weight_update((self.engine.weight_version or 0) + 1)
            self.session = True
        return 200, {"message": "Weight update started"}

    def update(self, info: UpdateInfo) -> tuple[int, Any]:
        with self._lock:
            if self.channel is None or not self.session:
                raise BadRequest("no active weight update: call /init_weight_transfer_engine and "
                                 "/start_weight_update first", status=409)
            failure: Exception | None = None
            with self.gate.exclusive():
                # every broadcast is received even after a failed load, so the group stays in step
                for bucket in receive_tensors(self.channel, info):
                    if failure is None:
                        try:
                            self.engine.update_weights(bucket)
                        except (KeyError, ValueError, TypeError) as exc:
                            failure = exc
            if failure is not None:  # the update failed: it ends here, uncommitted
                self.engine.abort_weight_update()
                self.session = False
                raise BadRequest(f"update_info: {failure}", param="update_info.names")
            self.updates += 1
        return 200, {"message": "Weights updated"}

    def finish(self) -> tuple[int, Any]:
        with self._lock:
            if not self.session:
                raise BadRequest("no active weight update: call /start_weight_update first", status=409)
            self.engine.commit_weight_update()
            self.session = False
        return 200, {"message": "Weight update finished"}

    def close(self) -> None:
        self.channel = None


def _protocol(parse: Callable[[Any], Any], raw: Any) -> Any:
    try:
        return parse(raw)
    except WeightTransferProtocolError as exc:
        raise BadRequest(str(exc)) from None
