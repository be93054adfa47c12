"""The papers' experiments as cached, configurable runs."""
