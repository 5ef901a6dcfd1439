"""Declarations: see the package docstring."""
from ..schema import Api, F

APIS: list[Api] = []
