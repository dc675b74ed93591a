"""mpi_operator"""
