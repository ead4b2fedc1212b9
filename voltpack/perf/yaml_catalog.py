"""Shared plumbing of voltpack's YAML catalogs: parse a file into pydantic, look up by name."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Generic, Protocol, Self, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from voltpack.model import safe_yaml
from voltpack.model.errors import VoltpackError
from voltpack.model.text_files import read_user_text

FileT = TypeVar("FileT", bound=BaseModel)


class _Named(Protocol):
    @property
    def name(self) -> str: ...


EntryT = TypeVar("EntryT", bound=_Named)


def parse_yaml_file(
    text: str, origin: str, file_model: type[FileT], error: type[Exception]
) -> FileT:
    """Validate YAML `text` as `file_model`; raise `error` naming `origin` and the bad field."""
    try:
        return file_model.model_validate(safe_yaml.safe_load(text))
    except yaml.YAMLError as exc:
        raise error(f"{origin}: not valid YAML: {exc}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        message = str(first["msg"]).removeprefix("Value error, ")
        raise error(f"{origin}: field {where or '(top level)'}: {message}") from None


class NamedCatalog(Generic[EntryT]):
    """Entries looked up by name, case-insensitively; `kind` names them in error messages."""

    def __init__(self, entries: list[EntryT], kind: str, error: type[Exception]) -> None:
        self._entries = list(entries)
        self._kind = kind
        self._error = error
        self._by_name: dict[str, EntryT] = {}
        for entry in entries:
            key = entry.name.casefold()
            if key in self._by_name:
                raise error(f"{kind} catalog: name {entry.name!r} is used twice")
            self._by_name[key] = entry

    @property
    def entries(self) -> list[EntryT]:
        """All entries in catalog order."""
        return list(self._entries)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.casefold() in self._by_name

    def get(self, name: str) -> EntryT:
        """The entry called `name`; raise the catalog's error listing the known names if unknown."""
        try:
            return self._by_name[name.casefold()]
        except KeyError:
            known = ", ".join(entry.name for entry in self._entries)
            raise self._error(f"unknown {self._kind} {name!r}; known models: {known}") from None


class ModelCatalogFile(NamedCatalog[EntryT]):
    """A NamedCatalog read from a YAML file of `models`; subclasses name the file's pydantic
    model, what the catalog is called in messages and the error it raises."""

    file_model: ClassVar[type[BaseModel]]
    kind: ClassVar[str]
    error: ClassVar[type[VoltpackError]]

    def __init__(self, models: list[EntryT]) -> None:
        super().__init__(models, self.kind, self.error)

    @classmethod
    def from_yaml(cls, path: Path) -> Self:
        """Load a catalog file; raise the catalog's error naming the file and the bad field."""
        return cls.parse(read_user_text(path, f"{cls.kind} catalog", cls.error), str(path))

    @classmethod
    def parse(cls, text: str, origin: str) -> Self:
        """Parse catalog YAML `text`; `origin` names it in error messages."""
        parsed = parse_yaml_file(text, origin, cls.file_model, cls.error)
        return cls(list(parsed.models))  # type: ignore[attr-defined]
