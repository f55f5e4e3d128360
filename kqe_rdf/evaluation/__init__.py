"""Evaluation: query sets with gold answers, metrics, the runner that scores methods, the HTML report."""
