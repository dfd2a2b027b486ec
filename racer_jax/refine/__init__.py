"""The dual-attention path refiner: score, rank and keep candidate paths."""
