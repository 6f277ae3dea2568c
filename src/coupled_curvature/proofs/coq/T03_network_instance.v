(* A pinned instance of T3_network_W with content: a deep linear network (σ = id, k = 1) of
   depth 3 with squared loss,  x |-> W3 (W2 (W1 x)),  W1 = 2, W3 = 3, one sample x = 1 with target
   1, block l = W2 (the hidden layer at depth 2) at W2 = 1.  There
     L(v) = (6 v - 1)²,  L is differentiable at w, its partial derivative is differentiable at w
   (so grad and hess are the true gradient and Hessian), and g = 60 <> 0, H = 72. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp Require Import boolp classical_sets functions reals topology normedtype derive.
From mathcomp Require Import ring.
From CoupledCurvature Require Import DefsAnalytic T01_analytic T02_homogeneous_rescaling T03_network_law.

Section DeepLinear.
Variable R : realType.
Local Notation V := (wvec R 0 0).

(* the squared loss against the target 1 *)
Definition sq_loss (s : 'I_1) (z : 'cV[R]_1) : R := (z 0 0 - 1) ^+ 2.

Definition dl_loss (v : V) : R^o :=
  \sum_(s < 1) sq_loss s (eval id (plug (Pre (2%:M : 'M[R]_1) 0 (Hole R 1))
                                      (Layer (unvec v) 0 (Out (3%:M : 'M[R]_1) 0)))
                                (1%:M : 'cV[R]_1)).

Definition P (v : V) : R^o := 6%:R * v 0 0 - 1.

Lemma dl_lossE : dl_loss = P * P.
Proof.
apply/funext => v; rewrite /dl_loss big_ord1 /sq_loss /P /=.
rewrite !map_mx_id // !addr0 mulmx1 !mul_scalar_mx.
rewrite -/(P v) /P.
change (((3 *: (unvec v *m (2%:M : 'M[R]_1))) 0 0 - 1) ^+ 2 = (6%:R * v 0 0 - 1) * (6%:R * v 0 0 - 1)).
rewrite -expr2.
rewrite mul_mx_scalar !mxE mulrA /unvec -natrM.
have E0 : mxvec_index (0 : 'I_1) (0 : 'I_1) = 0 :> 'I_(1 * 1) by rewrite [LHS]ord1.
by rewrite E0.
Qed.

Lemma derive_P (x : V) : derive P x (e 0) = 6%:R.
Proof.
rewrite /derive /=.
apply: (lim_near_cst (@norm_hausdorff _ [pseudoMetricNormedZmodType R of R^o])).
move: (near_neq0 R); apply: filterS => h h0.
rewrite /P !mxE eqxx /= mulr1 regular_scaleE.
rewrite [X in h^-1 * X](_ : _ = 6%:R * h); last by ring.
by rewrite mulrCA mulVf // mulr1.
Qed.

Lemma diff_P (x : V) : differentiable P x.
Proof.
have -> : P = (6%:R : R) *: (fun v : V => (v 0 0 : R^o)) - cst 1 by [].
apply: differentiableB; last exact: differentiable_cst.
by apply: differentiableZ; exact: differentiable_coord.
Qed.

Lemma d1_dl_loss : (fun y : V => (d1 dl_loss (e 0) y : R^o)) = (12%:R : R) *: P.
Proof.
apply/funext => y; rewrite /d1 dl_lossE deriveM ?derive_P; try exact/diff_derivable/diff_P.
rewrite !regular_scaleE.
change (P y * 6%:R + P y * 6%:R = (12%:R : R) * P y).
by rewrite -mulrDr -natrD mulrC.
Qed.

Lemma P_w : P (vec (1%:M : 'M[R]_1)) = 5%:R.
Proof.
rewrite /P /vec !mxE.
have E0 : (0 : 'I_(1 * 1)) = mxvec_index (0 : 'I_1) (0 : 'I_1) by rewrite [RHS]ord1.
rewrite [X in mxvec _ _ X]E0 mxvecE mxE eqxx mulr1n mulr1.
by rewrite -[6%:R]/((5 + 1)%:R : R) natrD addrK.
Qed.

(* the instance: σ = id is 1-homogeneous; at w = vec W2 = vec 1 the loss is differentiable near w,
   its partial derivative is differentiable at w, and g = 60, H = 72 *)
Theorem T3_deep_linear_instance :
  let L := fun v : wvec R 0 0 =>
    (\sum_(s < 1) (eval id (plug (Pre (2%:M : 'M[R]_1) 0 (Hole R 1))
                             (Layer (unvec v) 0 (Out (3%:M : 'M[R]_1) 0)))
                      (1%:M : 'cV[R]_1) 0 0 - 1) ^+ 2 : R^o) in
  let w := vec (1%:M : 'M[R]_1) in
  [/\ (forall c z : R, 0 < c -> id (c * z) = c ^+ 1 * id z),
      differentiable_near L w,
      (forall j, differentiable (fun y => (d1 L (e j) y : R^o)) w),
      grad L w = (60%:R : R)%:M &
      hess L w = (72%:R : R)%:M].
Proof.
move=> L w; have EL : L = dl_loss by [].
rewrite EL; split.
- by move=> c z _; rewrite expr1.
- by rewrite /differentiable_near; near=> y; rewrite dl_lossE; apply: differentiableM; exact: diff_P.
- move=> j; rewrite (ord1 j) d1_dl_loss.
  by apply: differentiableZ; exact: diff_P.
- apply/matrixP => i b; rewrite !ord1 !mxE eqxx mulr1n.
  have := congr1 (fun f => f w) d1_dl_loss; rewrite /= => ->.
  by change ((12%:R : R) * P w = 60%:R); rewrite P_w -natrM.
- apply/matrixP => i b; rewrite !ord1 !mxE eqxx mulr1n /d2 d1_dl_loss.
  change (derive (fun y => (12%:R * P y : R^o)) w (e 0) = 72%:R).
  by rewrite derive_scale_fun ?pnatr_eq0 // derive_P -natrM.
Unshelve. all: by end_near.
Qed.

End DeepLinear.
