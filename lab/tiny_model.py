"""Build the lab's tiny model directory offline: a tokenizer and a config, no weights.

The mock engine needs only what Dynamo reads to serve a model: `config.json` (else the mocker
exits), `tokenizer.json` (else the frontend cannot pre-process chat requests) and
`tokenizer_config.json` with a `chat_template` (else the frontend has no prompt formatter).
There is no model hub here, so a byte-level BPE tokenizer is trained on a synthetic corpus made of
the video stand-in words (`lab/standin.py`): each of those words becomes exactly one token, so a
stand-in prefix of N words is N prompt tokens.

Run with the Dynamo venv's Python (it has `tokenizers`), from the repository root:
    .lab/dynamo-venv/bin/python -m lab.tiny_model --out .lab/model
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

# Installed in the Dynamo venv only (this script runs there), hence no stubs for mypy here.
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # type: ignore[import-not-found]

from common.confined_paths import write_file
from common.output_folders import OutputFolderError, claimed_folder
from common.parsers import CommandParser
from lab.standin import vocabulary

MODEL_NAME = "tiny-llama"
SPECIAL_TOKENS = [
    "<|begin_of_text|>",  # id 0
    "<|end_of_text|>",  # id 1
    "<|start_header_id|>",  # id 2
    "<|end_header_id|>",  # id 3
    "<|eot_id|>",  # id 4
]
TARGET_VOCAB_SIZE = 4096
MAX_CONTEXT = 32768

MOCKER_OUTPUT_IDS = range(1000, 2000)
"""The token ids Dynamo 1.6.1's mock engine answers with, whatever the model: drawn uniformly from
1000 to 1999 (measured here: 960 tokens of 120 responses, read back through the frontend's
`nvext.extra_fields: ["completion_token_ids"]`, lay between 1000 and 1997). The trained vocabulary
stops near 1,500 tokens, and an id past its end decodes to nothing, so about half of the mock
engine's tokens were empty text and one short answer in a few hundred (8 tokens: 0.51^8) streamed
no content at all, which AIPerf counts as a failed request. `pad_vocabulary` closes the gap."""

# Llama-3 style. A message's content may be a list of parts (text, video_url): the text parts are
# kept and every media part becomes a marker, because the mock engine cannot see media.
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' }}"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'text' %}{{ part['text'] }}{% else %}{{ '[' + part['type'] + '] ' }}{% endif %}"
    "{% endfor %}{% endif %}"
    "{{ '<|eot_id|>' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)

_ENGLISH = (
    "What happens in this video ? Describe the scene , the objects and how they move . "
    "Question about video clip frame second color count where when which who why how many "
    "0 1 2 3 4 5 6 7 8 9 user assistant system [video_url] [image_url] the a of and to in is"
)


def training_corpus() -> list[str]:
    """Lines to learn merges from: every stand-in word many times, plus a little English."""
    words = vocabulary()
    # Each line starts with a space: in a prefix every word but the first follows a space.
    lines = [" " + " ".join(words[i : i + 16]) for i in range(0, len(words), 16)]
    return lines * 20 + [_ENGLISH] * 20


def train_tokenizer() -> Tokenizer:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=TARGET_VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(training_corpus(), trainer=trainer)
    return tokenizer


def pad_vocabulary(tokenizer: Tokenizer, size: int) -> Tokenizer:
    """The tokenizer with its BPE vocabulary filled up to `size` ids by filler words (" w1488",
    ...). They have no merges, so encoding is unchanged (a prompt costs the same tokens as
    before); they only give every id the mock engine answers with some text to decode to."""
    spec = json.loads(tokenizer.to_str())
    vocab: dict[str, int] = spec["model"]["vocab"]
    space = "\u0120"  # the byte-level alphabet's space, as in every word token after a space
    for token_id in range(tokenizer.get_vocab_size(), size):
        vocab[f"{space}w{token_id}"] = token_id
    return Tokenizer.from_str(json.dumps(spec))


def check(tokenizer: Tokenizer) -> None:
    """Fail the build if a stand-in word would cost more than one token after a space, or an id
    the mock engine answers with would decode to no text."""
    too_long = [w for w in vocabulary() if len(tokenizer.encode(" " + w).ids) != 1]
    silent = [i for i in MOCKER_OUTPUT_IDS if not tokenizer.decode([i]).strip()]
    pad = f"pad the vocabulary to at least {MOCKER_OUTPUT_IDS.stop}"
    for found, what, fix in (
        (too_long, "stand-in words are not single tokens", "raise TARGET_VOCAB_SIZE"),
        (silent, "ids the mock engine emits decode to no text", pad),
    ):
        if found:
            raise SystemExit(f"tiny tokenizer: {len(found)} {what} (e.g. {found[:5]}); {fix}")


def model_config(vocab_size: int) -> dict[str, object]:
    # A small Llama shape; the mock engine reads it for metadata only, there are no weights.
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": vocab_size,
        "hidden_size": 256,
        "intermediate_size": 512,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "max_position_embeddings": MAX_CONTEXT,
        "rms_norm_eps": 1e-05,
        "rope_theta": 500000.0,
        "hidden_act": "silu",
        "tie_word_embeddings": True,
        "torch_dtype": "bfloat16",
        "bos_token_id": 0,
        "eos_token_id": [1, 4],
    }


def tokenizer_config() -> dict[str, object]:
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": SPECIAL_TOKENS[0],
        "eos_token": SPECIAL_TOKENS[4],
        "pad_token": SPECIAL_TOKENS[1],
        "model_max_length": MAX_CONTEXT,
        "clean_up_tokenization_spaces": False,
        "add_bos_token": False,
        "chat_template": CHAT_TEMPLATE,
        "added_tokens_decoder": {
            str(i): {
                "content": t,
                "special": True,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "single_word": False,
            }
            for i, t in enumerate(SPECIAL_TOKENS)
        },
    }


def build(out: Path) -> None:
    tokenizer = pad_vocabulary(train_tokenizer(), MOCKER_OUTPUT_IDS.stop)
    check(tokenizer)
    out.mkdir(parents=True, exist_ok=True)
    write_file(out / "tokenizer.json", tokenizer.to_str(pretty=True))
    files = {
        "config.json": model_config(tokenizer.get_vocab_size()),
        "tokenizer_config.json": tokenizer_config(),
        "generation_config.json": {"bos_token_id": 0, "eos_token_id": [1, 4]},
    }
    for name, content in files.items():
        write_file(out / name, json.dumps(content, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = CommandParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="model directory to write")
    args = parser.parse_args(argv)
    try:
        with claimed_folder(args.out, "python -m lab.tiny_model"):
            build(args.out)
    except OutputFolderError as error:
        print(f"tiny model: {error}", file=sys.stderr)
        return 2
    print(f"tiny model '{MODEL_NAME}' written to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
