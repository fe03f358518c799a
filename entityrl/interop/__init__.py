"""Adapters between entityrl and other libraries' environments (Gymnasium, PettingZoo,
MiniGrid, Crafter). Each module needs its library (``pip install 'entityrl[<library>]'``)
and is imported only when used."""
