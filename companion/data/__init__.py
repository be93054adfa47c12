"""Task generators and corpus loaders (seeded numpy Generators, vectorised)."""
