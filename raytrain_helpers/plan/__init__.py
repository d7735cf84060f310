"""Pure computation, no outside systems: memory plan, cost, and the values of every manifest and config
(RayCluster, device plugins, eksctl) with their structural checks."""
