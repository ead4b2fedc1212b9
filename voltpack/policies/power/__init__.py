"""Power policies: how a domain over (or near) its budget chooses which GPUs to slow down.

The mechanism (accounting, fail-safe, actuation) is `voltpack.power`; a policy only sees one
domain at a time as arrays (`DomainView`) and returns the rung of each GPU's action ladder."""
