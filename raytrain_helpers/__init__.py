"""raytrain-tutorial helpers: everything the notebooks call.

The notebooks stay thin; the logic lives here, where it is tested.
"""

from .config import ConfigError, Settings, load, settings_from  # noqa: F401

__version__ = "0.1.0"
