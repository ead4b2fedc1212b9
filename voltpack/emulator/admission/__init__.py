"""What the emulator checks before it stores an object: schemas, CEL rules, per-kind validation
and strategies, priority."""
