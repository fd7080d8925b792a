"""Test doubles shipped with the package: a simulated cluster on a fake clock."""
