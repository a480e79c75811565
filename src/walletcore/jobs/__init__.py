"""Background work as plain async functions, bound to the deployment's adapters (`Jobs`),
run by an engine: procrastinate on PostgreSQL (`walletcore_jobs`), or `InProcessJobs` in
the HTTP process on SQLite (`WALLETCORE_JOBS`, `walletcore.jobs.settings`)."""

from walletcore.jobs.catalog import Jobs, PeriodicJob
from walletcore.jobs.inprocess import InProcessJobs
from walletcore.jobs.settings import JobSettings, JobsMode, jobs_mode

__all__ = ["InProcessJobs", "JobSettings", "Jobs", "JobsMode", "PeriodicJob", "jobs_mode"]
