/* three_rank_stream BIG [isend]: rank 0 sends BIG bytes to rank 1 and then
 * 64 MiB to rank 2, which waits in MPI_Recv from the start (with "isend"
 * rank 0 posts both with MPI_Isend instead of one MPI_Send after the other).
 * Rank 2's wait lasts as long as the big transfer: it must not end in a
 * timeout. Each receiver checks its data; exit status 1 on a bad byte. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char** argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    long big = argc > 1 ? atol(argv[1]) : (1L << 30);
    int overlap = argc > 2 && strcmp(argv[2], "isend") == 0;
    long small = 64L << 20;
    if (small > big)
        small = big;
    long have = rank == 2 ? small : big; /* rank 2 needs only its own message */
    char* buf = malloc((size_t)have);
    if (!buf) {
        fprintf(stderr, "rank %d: cannot allocate %ld bytes\n", rank, have);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    memset(buf, rank == 0 ? 0x5a : 0, (size_t)have);
    double t0 = MPI_Wtime();
    int bad = 0;
    if (rank == 0) {
        MPI_Request r[2];
        if (overlap) {
            MPI_Isend(buf, (int)big, MPI_BYTE, 1, 1, MPI_COMM_WORLD, &r[0]);
            MPI_Isend(buf, (int)small, MPI_BYTE, 2, 2, MPI_COMM_WORLD, &r[1]);
            MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
        } else {
            MPI_Send(buf, (int)big, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
            MPI_Send(buf, (int)small, MPI_BYTE, 2, 2, MPI_COMM_WORLD);
        }
    } else if (rank <= 2) {
        long len = rank == 1 ? big : small;
        MPI_Recv(buf, (int)len, MPI_BYTE, 0, rank, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (long i = 0; i < len && !bad; i++)
            bad = buf[i] != 0x5a;
    }
    printf("rank %d: %s after %.2f s\n", rank, bad ? "BAD DATA" : "done", MPI_Wtime() - t0);
    free(buf);
    MPI_Finalize();
    return bad;
}
