"""What one seat run consumed: tokens, turns, cost and the models that answered.

`Usage` is one normalised value for every agent CLI. A field the CLI does not
report is None (absent from the reckoning), never 0: 0 means the CLI said 0.
The adapters fill it from what each CLI prints; nothing here reads a file.

Meaning of the fields, the same for every CLI:

- `input_tokens`: every prompt token the models read, cached ones included
  (cache reads and cache writes are part of the input).
- `cached_input_tokens`: the part of the input read from the provider's cache.
- `cache_write_tokens`: the part of the input written to the cache.
- `output_tokens`: every token the models generated, reasoning included.
- `reasoning_tokens`: the part of the output spent on reasoning/thinking.
- `turns`: model round trips of the run as the CLI counts them (see below).
- `cost_usd` with `cost_source`: `reported` when the CLI printed the cost,
  `priced` when brigade computed it from a price table (`priced()`), `unknown`
  (and `cost_usd` None) otherwise. A reported cost of 0 with tokens spent is a
  CLI that could not price the model; it is kept as unknown.
- `model`: the model that did the work (the main loop's model); `models`: every
  model that answered, with its own share when the CLI splits it.
- `session_id`: the CLI's own id of the conversation; `api_duration_seconds`:
  the time spent waiting for the provider, when the CLI measures it.

How each CLI's numbers map onto these fields:

- claude (`result` event): `usage.input_tokens` counts uncached input only, so
  input = input_tokens + cache_read_input_tokens + cache_creation_input_tokens;
  cached = cache_read_input_tokens; cache write = cache_creation_input_tokens;
  output = output_tokens (thinking included); reasoning =
  `output_tokens_details.thinking_tokens`. `modelUsage` (keyed by the model id
  that answered, often a background model besides the main one) gives the
  per-model split and, when present, the totals; cost = `total_cost_usd`
  (reported); turns = `num_turns`; model = the `system/init` model.
- codex (`exec --json`): `turn.completed.usage` is the thread's running total
  (every model request so far), so the run's usage is the last one, not a sum;
  `input_tokens` already includes `cached_input_tokens`; output includes
  `reasoning_output_tokens`. turns = `turn.completed` events. No cost, and the
  model only when the CLI reports a reroute. app-server: the last
  `thread/tokenUsage/updated` `tokenUsage.total` (same meanings, camelCase);
  the model from the `thread/start` response (or a `model/rerouted`).
- gemini (`stream-json` `result.stats`): `input_tokens` is the prompt with its
  cached part (`cached`); the stream has no thought count, so output =
  total_tokens - input_tokens (the API's total counts thoughts) and reasoning is
  unknown. Per-model figures from `stats.models`. No cost, no turn count.
- qwen (`json`): `result.usage.input_tokens` includes the cache
  (`cache_read_input_tokens`); output_tokens excludes thoughts, which come from
  `result.stats.models[*].tokens.thoughts` and are added; turns = `num_turns`.
- opencode: `step_finish.part.tokens` per model call, summed: input =
  input + cache.read + cache.write (opencode's input excludes the cache);
  output = output + reasoning (opencode counts reasoning apart); cost = sum of
  `cost` (reported, from its price catalogue); turns = model calls.
- cursor (`result.usage`, camelCase; key set not documented by cursor): input =
  inputTokens + cacheReadTokens + cacheWriteTokens (counted apart as Anthropic
  does); no cost; the model is cursor's display name.
- copilot: per call `assistant.usage` (inputTokens includes cacheReadTokens, as
  in OpenAI's usage) when the CLI emits it, else only `assistant.message`
  `outputTokens`; its `cost` is a premium-request multiplier, not USD.
- goose (`metadata`): input_tokens includes the cache; cost_usd is goose's own
  (0 when it has no price).
- aider (its `Tokens: ... sent, ... cache write, ... cache hit, ... received.`
  lines, one per model call, summed): "sent" counts cache hits and counts cache
  writes twice (aider adds them to litellm's prompt count, which holds them), so
  input = sent - cache write; aider rounds counts of 1000 and more (12k, 1.2k).
  Cost = the last `$... session` (reported); turns = usage lines.
- ollama (`--verbose` on stderr): input = `prompt eval count` (the prompt
  tokens evaluated; a cached prefix is not counted), output = `eval count`.
- exec: what the program wrote to `$BRIGADE_USAGE_FILE` (`usage_from_document`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal, get_args

CostSource = Literal["reported", "priced", "unknown"]
COST_SOURCES: tuple[str, ...] = get_args(CostSource)

# the token fields a model's share and the run's totals have in common
TOKEN_FIELDS = (
    "input_tokens",
    "cached_input_tokens",
    "cache_write_tokens",
    "output_tokens",
    "reasoning_tokens",
)


class UsageError(ValueError):
    """A usage document that is not one (a one-line problem with its JSON path)."""


@dataclass(frozen=True)
class ModelUsage:
    """One model's share of a run; None where the CLI does not split it."""

    model: str
    input_tokens: int | None = None
    cached_input_tokens: int | None = None
    cache_write_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_tokens: int | None = None
    cost_usd: float | None = None


@dataclass(frozen=True)
class Usage:
    """A run's usage, normalised (see the module docstring); None is unknown."""

    input_tokens: int | None = None
    cached_input_tokens: int | None = None
    cache_write_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_tokens: int | None = None
    turns: int | None = None
    cost_usd: float | None = None
    cost_source: CostSource = "unknown"
    model: str | None = None
    models: tuple[ModelUsage, ...] = ()
    session_id: str | None = None
    api_duration_seconds: float | None = None

    def __post_init__(self) -> None:
        # a cost and its source are known together, or not at all
        if (self.cost_usd is None) != (self.cost_source == "unknown"):
            raise ValueError(f"cost_usd {self.cost_usd!r} with cost_source {self.cost_source!r}")

    @property
    def known(self) -> bool:
        """Whether any token count, turn count or cost is known."""
        return any(getattr(self, name) is not None for name in (*TOKEN_FIELDS, "turns", "cost_usd"))


def _plus(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    return a + b


def merge_models(*groups: Iterable[ModelUsage]) -> tuple[ModelUsage, ...]:
    """Models' shares with one entry per model (shares of the same model added up)."""
    merged: dict[str, ModelUsage] = {}
    for share in (share for group in groups for share in group):
        seen = merged.get(share.model)
        if seen is None:
            merged[share.model] = share
            continue
        merged[share.model] = ModelUsage(
            model=share.model,
            cost_usd=_plus(seen.cost_usd, share.cost_usd),
            **{name: _plus(getattr(seen, name), getattr(share, name)) for name in TOKEN_FIELDS},
        )
    return tuple(merged.values())


def _cost_source(a: Usage, b: Usage) -> CostSource:
    sources = {u.cost_source for u in (a, b) if u.cost_usd is not None}
    if not sources:
        return "unknown"
    return "reported" if sources == {"reported"} else "priced"


def add(a: Usage, b: Usage) -> Usage:
    """The usage of two runs (or two parts of one) together.

    A field is the sum of the values that are known and None only when neither
    is: callers that add over many runs count the unknown ones themselves.
    """
    return Usage(
        turns=_plus(a.turns, b.turns),
        cost_usd=_plus(a.cost_usd, b.cost_usd),
        cost_source=_cost_source(a, b),
        model=a.model or b.model,
        models=merge_models(a.models, b.models),
        session_id=a.session_id or b.session_id,
        api_duration_seconds=_plus(a.api_duration_seconds, b.api_duration_seconds),
        **{name: _plus(getattr(a, name), getattr(b, name)) for name in TOKEN_FIELDS},
    )


def total(usages: Iterable[Usage]) -> Usage:
    """The sum of any number of usages (`add` over all of them)."""
    result = Usage()
    for usage in usages:
        result = add(result, usage)
    return result


def from_models(models: Iterable[ModelUsage], **rest: Any) -> Usage:
    """A usage whose token totals and cost are its models' shares added up.

    `rest` gives the other fields; a token total or a cost given there wins.
    """
    shares = tuple(models)
    totals = {name: _sum_known(getattr(m, name) for m in shares) for name in TOKEN_FIELDS}
    for name, value in rest.items():
        if name in TOKEN_FIELDS and value is not None:
            totals[name] = value
    other = {name: value for name, value in rest.items() if name not in TOKEN_FIELDS}
    if "cost_usd" not in other:
        cost = _sum_known(m.cost_usd for m in shares)
        other["cost_usd"] = cost
        other["cost_source"] = "reported" if cost is not None else "unknown"
    return Usage(models=shares, **totals, **other)


def _sum_known(values: Iterable[Any]) -> Any:
    found = [value for value in values if value is not None]
    return sum(found) if found else None


def reported_cost(cost: Any, *, tokens_spent: bool) -> dict[str, Any]:
    """`cost_usd`/`cost_source` for a cost a CLI printed (0 with tokens spent: unpriced)."""
    if not _is_number(cost) or cost < 0 or (cost == 0 and tokens_spent):
        return {"cost_usd": None, "cost_source": "unknown"}
    return {"cost_usd": float(cost), "cost_source": "reported"}


@dataclass(frozen=True)
class Price:
    """USD per million tokens for one model (cached input defaults to the input price)."""

    input_per_mtok: float
    output_per_mtok: float
    cached_input_per_mtok: float | None = None


def _priced(price: Price, source: Usage | ModelUsage) -> float | None:
    if source.input_tokens is None or source.output_tokens is None:
        return None
    cached = source.cached_input_tokens or 0
    cached_rate = price.cached_input_per_mtok
    cached_rate = price.input_per_mtok if cached_rate is None else cached_rate
    return (
        (source.input_tokens - cached) * price.input_per_mtok
        + cached * cached_rate
        + source.output_tokens * price.output_per_mtok
    ) / 1_000_000


def priced(usage: Usage, prices: Mapping[str, Price], model: str | None = None) -> Usage:
    """The usage with its cost computed from `prices` when the CLI reported none.

    Each model with its own token counts is priced by its own entry; otherwise
    the run's totals are priced as `usage.model` (or `model`, the configured
    one). The cost stays unknown when a model has no price or a count is missing.
    """
    if usage.cost_usd is not None:
        return usage
    if usage.models and all(m.input_tokens is not None for m in usage.models):
        costs: list[float] = []
        for share in usage.models:
            price = prices.get(share.model)
            cost = _priced(price, share) if price is not None else None
            if cost is None:
                return usage
            costs.append(cost)
        return replace(usage, cost_usd=sum(costs), cost_source="priced")
    name = usage.model or model
    price = prices.get(name) if name is not None else None
    cost = _priced(price, usage) if price is not None else None
    if cost is None:
        return usage
    return replace(usage, cost_usd=cost, cost_source="priced")


def repriced(usage: Usage, prices: Mapping[str, Price], model: str | None = None) -> Usage:
    """The usage priced with `prices` as they are now: a reported cost is kept, a cost priced
    earlier (perhaps at other prices) is priced again, and stays unknown without a price."""
    if usage.cost_source == "priced":
        usage = replace(usage, cost_usd=None, cost_source="unknown")
    return priced(usage, prices, model)


# a price table entry's keys (USD per million tokens), as rosters and plan.json spell them
PRICE_KEYS = ("input", "cached_input", "output")


def price_document(price: Price) -> dict[str, float]:
    """A price as rosters and plan.json write it (`cached_input` only when set)."""
    doc = {"input": price.input_per_mtok, "output": price.output_per_mtok}
    if price.cached_input_per_mtok is not None:
        doc["cached_input"] = price.cached_input_per_mtok
    return doc


def price_from_document(doc: Mapping[str, Any]) -> Price:
    """A price from its (schema-valid) document form."""
    cached = doc.get("cached_input")
    return Price(
        input_per_mtok=float(doc["input"]),
        output_per_mtok=float(doc["output"]),
        cached_input_per_mtok=float(cached) if cached is not None else None,
    )


# -- the document form (run.json, receipts, an exec program's usage file) ---------

_INT_FIELDS = (*TOKEN_FIELDS, "turns")
_DOCUMENT_KEYS = (
    *_INT_FIELDS,
    "cost_usd",
    "cost_source",
    "model",
    "models",
    "session_id",
    "api_duration_seconds",
)
_MODEL_KEYS = (*TOKEN_FIELDS, "cost_usd")


def usage_document(usage: Usage) -> dict[str, Any]:
    """The JSON form: every key present, null where unknown; `models` keyed by model id."""
    doc: dict[str, Any] = {name: getattr(usage, name) for name in _DOCUMENT_KEYS}
    doc["models"] = {
        share.model: {name: getattr(share, name) for name in _MODEL_KEYS} for share in usage.models
    }
    return doc


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _count(value: Any, path: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UsageError(f"{path}: must be a whole number of 0 or more, or null")
    return value


def _amount(value: Any, path: str) -> float | None:
    if value is None:
        return None
    if not _is_number(value) or value < 0:
        raise UsageError(f"{path}: must be a number of 0 or more, or null")
    return float(value)


def _text(value: Any, path: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise UsageError(f"{path}: must be a non-empty string or null")
    return value


def _object(value: Any, path: str, allowed: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise UsageError(f"{path}: must be an object")
    for key in value:
        if key not in allowed:
            raise UsageError(f"{path}: unknown key {key!r} (known: {', '.join(allowed)})")
    return value


def usage_from_document(doc: Any, path: str = "usage") -> Usage:
    """A Usage from its JSON form; missing keys are unknown. UsageError names the problem."""
    doc = _object(doc, path, _DOCUMENT_KEYS)
    values: dict[str, Any] = {name: _count(doc.get(name), f"{path}.{name}") for name in _INT_FIELDS}
    cost = _amount(doc.get("cost_usd"), f"{path}.cost_usd")
    source = doc.get("cost_source")
    if source is None:
        source = "unknown" if cost is None else "reported"
    if source not in COST_SOURCES:
        raise UsageError(f"{path}.cost_source: must be one of {', '.join(COST_SOURCES)}")
    if (cost is None) != (source == "unknown"):
        raise UsageError(f"{path}.cost_source: {source!r} does not fit cost_usd {cost!r}")
    models: list[ModelUsage] = []
    raw_models = doc.get("models")
    if raw_models is not None:
        if not isinstance(raw_models, dict):
            raise UsageError(f"{path}.models: must be an object keyed by model id")
        for name, share in raw_models.items():
            where = f"{path}.models.{name}"
            if not name:
                raise UsageError(f"{path}.models: a model id must not be empty")
            share = _object(share, where, _MODEL_KEYS)
            models.append(
                ModelUsage(
                    model=name,
                    cost_usd=_amount(share.get("cost_usd"), f"{where}.cost_usd"),
                    **{key: _count(share.get(key), f"{where}.{key}") for key in TOKEN_FIELDS},
                )
            )
    return Usage(
        cost_usd=cost,
        cost_source=source,
        model=_text(doc.get("model"), f"{path}.model"),
        models=tuple(models),
        session_id=_text(doc.get("session_id"), f"{path}.session_id"),
        api_duration_seconds=_amount(
            doc.get("api_duration_seconds"), f"{path}.api_duration_seconds"
        ),
        **values,
    )


# how text shows a value that is not known (never 0)
UNKNOWN = "–"


def money(value: Any) -> str:
    """`$0.1234`, `$0.000559` below a cent, `$1,234.56` from $100; `–` when unknown."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return UNKNOWN
    if abs(value) >= 100:
        return f"${value:,.2f}"
    if value == 0 or abs(value) >= 0.01:
        return f"${value:.4f}"
    if abs(value) < 0.000001:
        return "<$0.000001"
    return f"${value:.6f}"
