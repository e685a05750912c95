"""Read a JSON settings/config file; a file that is not valid JSON fails naming the file."""
from __future__ import annotations

import json
from typing import Any


class JsonFileError(ValueError):
    """A settings or config file is missing or not valid JSON; the message names the file."""


def read_json(path: str, what: str = "settings file") -> Any:
    """The parsed content of ``path``.

    Raises:
        JsonFileError: ``path`` cannot be read or is not valid JSON (names the
            file, line and column).
    """
    try:
        with open(path) as handle:
            return json.load(handle)
    except json.JSONDecodeError as error:
        raise JsonFileError(
            "%s %s is not valid JSON: line %d column %d: %s" % (what, path, error.lineno, error.colno, error.msg)
        ) from None
    except OSError as error:
        raise JsonFileError("%s %s cannot be read: %s" % (what, path, error.strerror or error)) from None
