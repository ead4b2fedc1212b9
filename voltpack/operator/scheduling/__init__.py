"""The scheduling loop's adapters: the cycle's input from the caches, gang binding,
jobs, queues, fault recovery, training rounds."""
