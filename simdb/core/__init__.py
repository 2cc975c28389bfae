"""The pure core: text to tokens, features, the 64-bit SimHash fingerprint, the verification
sketch and its band keys, bits and probes. Nothing here imports a database driver (an
import-linter contract in pyproject.toml keeps it so); the store and the facade build on it."""
