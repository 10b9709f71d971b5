"""Close-match hints for unknown config keys and plugin options (``Did you mean 'keep_images'?``)."""

from __future__ import annotations

from pydantic import BaseModel


def nested_model(model: type[BaseModel], parts: list[str]) -> type[BaseModel]:
    """The (sub)model owning the last key of ``parts`` (``hosts[0].url`` -> the host model)."""
    import typing

    for part in parts[:-1]:
        field = model.model_fields.get(part.split("[")[0])
        if field is None:
            return model
        candidates = [field.annotation]
        while candidates:  # unwrap Optional[...], list[...], dict[str, ...]
            ann = candidates.pop()
            if isinstance(ann, type) and issubclass(ann, BaseModel):
                model = ann
                break
            candidates.extend(typing.get_args(ann))
        else:
            return model
    return model


#: config keys that once existed, and what replaced them (a config still using one fails naming the new key)
RETIRED = {
    "run.tensorboard": "trackers: [{name: tensorboard}] (a tracker plugin; several trackers may run at once)",
}


def suggest_field(path: str, model: type[BaseModel], root: str = "") -> str:
    from core.registry import close_matches

    if path in RETIRED:
        return f" It was replaced by {RETIRED[path]}."

    parts = path.removeprefix(root).strip(".").split(".")
    owner = nested_model(model, parts) if root else model
    match = close_matches(parts[-1], list(owner.model_fields))
    return f" Did you mean '{match[0]}'?" if match else f" Known options: {', '.join(owner.model_fields) or '(none)'}."
