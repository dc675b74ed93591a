"""jax_operator: the JAXJob operator."""
