"""Model families, one file each."""

from companion.models.transformer import FF_KINDS, ModelConfig, Transformer

__all__ = ["FF_KINDS", "ModelConfig", "Transformer"]
