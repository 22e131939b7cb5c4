"""Tests of marl.report."""
