"""The installed package's version, for reports and manifests (a leaf module: the package
root imports every floor, so nothing below it may import the root for this)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("mms-pipeline")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"
