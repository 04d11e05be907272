"""The declarative layer: what an environment is (`EnvironmentSpec`), its scales, anchors and anchors files, what a
scale resolves to (`ResolvedEnvironment`), and the pure scoring arithmetic. Imports neither `runtime` nor `tools`
(tests/contract/test_layers.py), and nothing heavier than pydantic."""
