"""Who may do what in the emulator: authentication, RBAC, access reviews."""
