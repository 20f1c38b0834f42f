"""The Jinja2 environment every generated file is rendered with.

Templates are looked up in ``templates/`` (shipped with ftgen) and, for a family, first in the
family's own folder, which may lie anywhere (a family defined outside the package).
"""

from __future__ import annotations

from pathlib import Path

import jinja2

from .paths import templates_dir


class TemplateEnv:
    def __init__(self, search: tuple[Path, ...] = ()) -> None:
        self.search = tuple(Path(p) for p in search) + (templates_dir(),)
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader([str(p) for p in self.search]),
            undefined=jinja2.StrictUndefined,
            keep_trailing_newline=True,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.filters["cbool"] = lambda b: "true" if b else "false"
        self._derived: dict[Path, TemplateEnv] = {}

    def including(self, folder: Path) -> "TemplateEnv":
        """An environment that looks in ``folder`` first (kept, so its compiled templates are reused)."""
        folder = Path(folder).resolve()
        if folder in self.search:
            return self
        if folder not in self._derived:
            self._derived[folder] = TemplateEnv((folder,) + self.search[:-1])
        return self._derived[folder]

    def render(self, template: str, ctx: dict) -> str:
        return self.env.get_template(template).render(**ctx)

    def raw(self, relpath: str) -> str:
        return (templates_dir() / relpath).read_text()
