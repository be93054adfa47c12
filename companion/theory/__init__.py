"""Closed forms and numerical checks of the theorems."""
