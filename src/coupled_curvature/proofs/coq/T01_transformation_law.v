(* T1: the transformation law.
   Algebraic part (over any real closed field, every n): under the block action of an
   invertible A (w -> A w, g -> A^-T g, H -> A^-T H A^-1), wᵀHw and wᵀg are unchanged;
   for a block-diagonal T = diag(A1, A2) (a block b and the rest of the parameters) the
   action of T on the full vectors restricts to the block action of A1 and A2 on the
   blocks, and the diagonal Hessian blocks map by A_i^-T H_ii A_i^-1, so each block's wᵀHw
   and wᵀg are unchanged under every block-diagonal linear map. *)
From mathcomp Require Import all_ssreflect all_algebra.
From CoupledCurvature Require Import Defs Common.

Section Algebraic.
Variable R : rcfType.

Theorem quad_act n (A H : 'M[R]_n) (w : 'cV[R]_n) :
  A \in unitmx -> quad (act_H A H) (act_w A w) = quad H w.
Proof.
move=> Au; rewrite /quad /act_H /act_w dot_mulmx !mulmxA -trmx_mul mulVmx //.
by rewrite trmx1 mul1mx mulmxKV.
Qed.

Theorem dot_act n (A : 'M[R]_n) (w g : 'cV[R]_n) :
  A \in unitmx -> dot (act_w A w) (act_g A g) = dot w g.
Proof.
by move=> Au; rewrite /act_w /act_g dot_mulmx mulmxA -trmx_mul mulVmx // trmx1 mul1mx.
Qed.

(* the block-diagonal version: T = diag(A1, A2) acting on (w1; w2), (g1; g2), H *)
Section Blocks.
Variables n1 n2 : nat.
Variables (A1 : 'M[R]_n1) (A2 : 'M[R]_n2).
Hypotheses (A1u : A1 \in unitmx) (A2u : A2 \in unitmx).
Let T : 'M[R]_(n1 + n2) := block_mx A1 0 0 A2.

Lemma T_unit : T \in unitmx.
Proof. by rewrite /T block_diag_mx_unit A1u A2u. Qed.

Lemma invmx_T : invmx T = block_mx (invmx A1) 0 0 (invmx A2).
Proof. by rewrite invmx_block_diag // T_unit. Qed.

Lemma act_w_block w1 w2 :
  act_w T (col_mx w1 w2) = col_mx (act_w A1 w1) (act_w A2 w2).
Proof. by rewrite /act_w /T mul_block_col !mul0mx addr0 add0r. Qed.

Lemma act_g_block g1 g2 :
  act_g T (col_mx g1 g2) = col_mx (act_g A1 g1) (act_g A2 g2).
Proof.
by rewrite /act_g invmx_T tr_block_mx !trmx0 mul_block_col !mul0mx addr0 add0r.
Qed.

Lemma act_H_block H :
  ulsubmx (act_H T H) = act_H A1 (ulsubmx H) /\
  drsubmx (act_H T H) = act_H A2 (drsubmx H).
Proof.
rewrite /act_H invmx_T tr_block_mx !trmx0 -[H in _ *m H *m _]submxK.
rewrite !mulmx_block !mulmx0 !mul0mx !addr0 !add0r block_mxKul block_mxKdr.
by split.
Qed.
End Blocks.

(* T1 headline: for every block-diagonal T = diag(A1, A2) with invertible blocks and every
   (w, g, H) of the full parameter vector, the first block's wᵀHw and wᵀg are unchanged
   (the second block's likewise, by symmetry of the statement in the order of blocks). *)
Theorem block_diag_invariance n1 n2 (A1 : 'M[R]_n1) (A2 : 'M[R]_n2)
    (w g : 'cV[R]_(n1 + n2)) (H : 'M[R]_(n1 + n2)) :
  A1 \in unitmx -> A2 \in unitmx ->
  let T := block_mx A1 0 0 A2 in
  [/\ quad (ulsubmx (act_H T H)) (usubmx (act_w T w)) = quad (ulsubmx H) (usubmx w),
      dot (usubmx (act_w T w)) (usubmx (act_g T g)) = dot (usubmx w) (usubmx g),
      quad (drsubmx (act_H T H)) (dsubmx (act_w T w)) = quad (drsubmx H) (dsubmx w) &
      dot (dsubmx (act_w T w)) (dsubmx (act_g T g)) = dot (dsubmx w) (dsubmx g)].
Proof.
move=> A1u A2u T; have [HU HD] := act_H_block A1u A2u H.
rewrite /T -[w]vsubmxK -[g]vsubmxK act_w_block act_g_block // !col_mxKu !col_mxKd.
by rewrite HU HD !quad_act // !dot_act.
Qed.

End Algebraic.

(* non-vacuity: the hypotheses hold for A1 = 2 I, A2 = 1 *)
Lemma T1_block_instance (R : rcfType) :
  (2%:M : 'M[R]_1) \in unitmx /\ (1%:M : 'M[R]_1) \in unitmx.
Proof.
split; last exact: unitmx1.
rewrite unitmxE det_scalar expr1 unitfE (_ : 2 = 1 + 1 :> R) //.
by rewrite paddr_eq0 ?ler01 // oner_eq0.
Qed.
