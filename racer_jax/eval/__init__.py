"""Evaluation runners, metrics and reports."""
