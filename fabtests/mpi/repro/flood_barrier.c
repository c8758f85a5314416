/* flood3 N SIZE: rank 1 Isends N messages (tags 0..N-1) to rank 0, then both
 * call MPI_Barrier; rank 0 then receives them in order. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int c, char** v)
{
    MPI_Init(&c, &v);
    int r, n = atoi(v[1]), s = atoi(v[2]);
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    char* b = calloc((size_t)n, (size_t)s + 1);
    MPI_Request* q = malloc(sizeof(*q) * n);
    if (r == 1)
        for (int i = 0; i < n; i++)
            MPI_Isend(b + (size_t)i * s, s, MPI_BYTE, 0, i, MPI_COMM_WORLD, &q[i]);
    fprintf(stderr, "rank %d: barrier\n", r);
    MPI_Barrier(MPI_COMM_WORLD);
    fprintf(stderr, "rank %d: barrier done\n", r);
    if (r == 0)
        for (int i = 0; i < n; i++)
            MPI_Recv(b, s, MPI_BYTE, 1, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    else
        MPI_Waitall(n, q, MPI_STATUSES_IGNORE);
    fprintf(stderr, "rank %d: all done\n", r);
    MPI_Finalize();
    return 0;
}
