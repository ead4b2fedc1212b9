"""The power loop's adapters: budgets and GPUNode objects, forecasts, metrics, straggler
caps."""
