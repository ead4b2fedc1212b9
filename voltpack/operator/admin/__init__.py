"""What the admin API reads from the cluster: views, tallies, policy dry runs."""
