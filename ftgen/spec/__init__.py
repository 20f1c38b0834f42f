"""YAML spec -> typed :class:`Spec`: validation with field paths, then cartesian expansion."""

from .loader import Spec, load_spec, load_spec_text, parse_one_shape, parse_shapes  # noqa: F401
