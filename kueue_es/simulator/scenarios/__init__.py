"""Scenario files bundled with the simulator (package data)."""
