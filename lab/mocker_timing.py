"""The mock engine's timing model, as Dynamo 1.6.1's `dynamo.mocker` computes it, and its knobs.

The engine is the `aisimulate-core` 0.13.0 crate compiled into Dynamo's `_core.abi3.so`
(`crates/core/src/engine/common/perf_model.rs`, vLLM backend, default settings). Every formula
here was checked against the installed build with its offline replay
(`dynamo._core.run_mocker_synthetic_trace_replay`), to about 1e-4 ms:

- a pass's prefill costs `prefill_ms(new tokens of the pass)`: only tokens not found in the prefix
  cache count, the cache holds whole blocks of `BLOCK_SIZE` tokens, and with chunked prefill (the
  default) a pass takes at most `MAX_BATCHED_TOKENS` new tokens, so a long prompt pays the
  polynomial once per chunk;
- a decode pass costs `decode_ms(utilisation)`, where utilisation is the decoding sequences'
  context tokens over the cache's capacity; the batch size matters only through it;
- prefill times are divided by `--speedup-ratio`, decode times by `--speedup-ratio` x
  `--decode-speedup-ratio`; the engine sleeps in wall-clock time until each pass's end.

The lab uses these only to choose knobs (`lab.planner.calibration`): every choice is then checked by
running the real engine and measuring.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

PREFILL_COEFFICIENTS = (16.50142, 1.518344e-02, 4.209989e-07)
"""Prefill milliseconds = c0 + c1 x tokens + c2 x tokens^2, tokens being one pass's new tokens."""
DECODE_COEFFICIENTS = (5.74, 54.01, -25.74)
"""Decode milliseconds = max(1, d0 + d1 x u + d2 x u^2), u the cache utilisation (0..1)."""
BLOCK_SIZE = 64
MAX_BATCHED_TOKENS = 8192
KV_CAPACITY_TOKENS = 16384 * BLOCK_SIZE
"""Default `num_gpu_blocks` x `block_size`: one worker's prefix cache, in tokens."""


def prefill_pass_ms(tokens: int) -> float:
    """One pass of `tokens` new tokens, at speed 1."""
    if tokens <= 0:
        return 0.0
    c0, c1, c2 = PREFILL_COEFFICIENTS
    return c0 + c1 * tokens + c2 * tokens * tokens


def prefill_ms(tokens: int) -> float:
    """A prompt's `tokens` new tokens alone on a worker, chunked as the engine chunks them."""
    full, rest = divmod(max(tokens, 0), MAX_BATCHED_TOKENS)
    return full * prefill_pass_ms(MAX_BATCHED_TOKENS) + prefill_pass_ms(rest)


def decode_ms(context_tokens: int) -> float:
    """One decode pass of sequences holding `context_tokens` in the cache, at speed 1."""
    utilisation = min(1.0, context_tokens / KV_CAPACITY_TOKENS)
    d0, d1, d2 = DECODE_COEFFICIENTS
    return max(1.0, d0 + d1 * utilisation + d2 * utilisation * utilisation)


class EngineSpeed(BaseModel):
    """The mock engine's speed in the simulated (GPU) time: `speedup` for prefill, and
    `speedup` x `decode_speedup` for decode. `mocker_args(slowdown)` runs it `slowdown` times
    slower than that, on the wall clock, so that a small machine keeps up with the load."""

    model_config = ConfigDict(frozen=True)

    speedup: float = Field(gt=0)
    decode_speedup: float = Field(gt=0)

    def mocker_args(self, slowdown: float) -> tuple[str, ...]:
        # Laid out by hand (formatter skipped): a command line, each option beside its value.
        return (
            "--speedup-ratio", f"{self.speedup / slowdown:.6g}",
            "--decode-speedup-ratio", f"{self.decode_speedup:.6g}",
        )  # fmt: skip

    def prefill_ms(self, tokens: int) -> float:
        return prefill_ms(tokens) / self.speedup

    def decode_ms(self, context_tokens: int) -> float:
        return decode_ms(context_tokens) / (self.speedup * self.decode_speedup)


REAL_SPEED = EngineSpeed(speedup=1, decode_speedup=1)
"""`dynamo.mocker`'s own default speed: the timing the lab's A/B runs (slowed by its time scale)."""
