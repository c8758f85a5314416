/* dynamic_window [put|fop]: each rank attaches 4 KiB to a dynamic window,
 * publishes its address, and in one MPI_Win_lock_all epoch either puts 8
 * bytes into its right neighbour's memory ("put", the default) or adds 1 to
 * rank 0's first word with MPI_Fetch_and_op ("fop"); then checks what
 * arrived. Exit status 0 when every rank saw what it should, 1 else. A
 * hang is the bug (run it under timeout(1)). */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char** argv)
{
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    int fop = argc > 1 && strcmp(argv[1], "fop") == 0;
    int64_t* mem = calloc(512, sizeof(int64_t));
    MPI_Aint mine, *addr = malloc(sizeof(MPI_Aint) * (size_t)n);
    MPI_Win win;
    MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Win_attach(win, mem, 4096);
    MPI_Get_address(mem, &mine);
    MPI_Allgather(&mine, 1, MPI_AINT, addr, 1, MPI_AINT, MPI_COMM_WORLD);
    int next = (rank + 1) % n;
    int64_t value = 1000 + rank, one = 1, old = -1;
    fprintf(stderr, "rank %d: attached, entering the epoch\n", rank);
    MPI_Win_lock_all(0, win);
    if (fop)
        MPI_Fetch_and_op(&one, &old, MPI_INT64_T, 0, addr[0], MPI_SUM, win);
    else
        MPI_Put(&value, 1, MPI_INT64_T, next, addr[next] + 8, 1, MPI_INT64_T, win);
    MPI_Win_unlock_all(win);
    MPI_Barrier(MPI_COMM_WORLD);
    int bad = 0;
    if (fop)
        bad = rank == 0 && mem[0] != n;
    else
        bad = mem[1] != 1000 + (rank + n - 1) % n;
    fprintf(stderr, "rank %d: %s\n", rank, bad ? "WRONG" : "ok");
    MPI_Win_detach(win, mem);
    MPI_Win_free(&win);
    MPI_Finalize();
    return bad;
}
