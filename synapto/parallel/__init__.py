"""MPI scaffolding shared by evolution and PPO: launching and the task farm."""
