"""Typed records read back: a file that is not the record is named by its fields, and nothing of
what it holds is printed that could be a credential (a record path linked to a key file)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from stages.core.typed_files import read_model, write_model


class Record(BaseModel):
    level: int


KEY_LINE = "-----BEGIN OPENSSH PRIVATE KEY-----"
KEY_BODY = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW"


@pytest.mark.parametrize(
    "content",
    [
        f'"{KEY_LINE}\\n{KEY_BODY}"',  # a JSON string: the whole file is one value
        f'{{"level": "{KEY_LINE}{KEY_BODY}"}}',  # a field holding it
    ],
)
def test_a_file_that_is_not_the_record_names_its_fields_never_its_content(
    tmp_path: Path, content: str
) -> None:
    path = tmp_path / "prediction.json"
    path.write_text(content)

    with pytest.raises(ValueError) as refused:
        read_model(Record, path, "prediction", "run `lab predict`")

    message = str(refused.value)
    assert f"{path} is not a prediction" in message
    assert KEY_BODY[:12] not in message and "OPENSSH" not in message


def test_a_record_reads_back_as_written(tmp_path: Path) -> None:
    path = write_model(Record(level=3), tmp_path / "record.json")

    assert read_model(Record, path, "record", "write one") == Record(level=3)
