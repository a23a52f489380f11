"""How long the TaskManager's checks take inside a compile (shared by the kernels' compile tests)."""
import time


def verification_seconds(monkeypatch, compile_once) -> list:
    """CPU seconds (this thread) of every ``TaskManager.print_and_verify`` (all checks, the exhaustive one included) that
    ``compile_once()`` runs, with the disk cache off; give it a configuration no other test compiled."""
    from tsjit.ts import task_manager
    durations = []
    original = task_manager.TaskManager.print_and_verify

    def timed(self, *args, **kwargs):
        t0 = time.thread_time()   # CPU time of this thread: holds on a loaded machine, excludes helper threads
        try:
            return original(self, *args, **kwargs)
        finally:
            durations.append(time.thread_time() - t0)

    monkeypatch.setattr(task_manager.TaskManager, "print_and_verify", timed)
    monkeypatch.setenv("TSJIT_DISABLE_CACHE", "1")
    compile_once()
    return durations
