"""Text encoders: concept names, relation names and questions -> vectors."""
